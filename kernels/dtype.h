/* dtype.h — the storage types a kernel can be handed, and the scalar fp32 <-> bf16 conversions
 * every backend's `cast` reproduces bit for bit (kernels/cpu/cast.c is the reference,
 * kernels/cuda/cast.cu mirrors it, nn/tensor.c uses them at the host boundary).
 *
 * bf16 is the upper half of an IEEE fp32 (1 sign, 8 exponent, 7 mantissa bits), held as uint16_t:
 *   widen:   exact (the 16 low bits become 0).
 *   narrow:  round to nearest, ties to even, on the bit pattern (adding 0x7FFF + lsb carries into
 *            the exponent exactly when the value rounds up, subnormals included; values past the
 *            largest bf16 by half an ulp or more become inf). NaN stays NaN: its top 16 bits with
 *            the quiet bit set (the rounding add could otherwise carry a NaN into inf).
 * No flush of subnormals (the AVX512_BF16 vcvtneps2bf16 flushes them, so kernels do not use it). */
#ifndef ENDORET_DTYPE_H
#define ENDORET_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { ER_F32 = 0, ER_BF16 = 1, ER_DTYPE_COUNT };

static inline size_t er_dtype_size(int dtype) { return dtype == ER_BF16 ? 2 : 4; }
static inline const char *er_dtype_name(int dtype) { return dtype == ER_BF16 ? "bf16" : dtype == ER_F32 ? "fp32" : "?"; }

static inline float er_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t er_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN: quiet, sign kept */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Element i of a buffer of storage type dtype, widened; and stored with one rounding (the CPU
 * references' form of cuda_common.h's cu_load_f32 / cu_store_f32). */
static inline float er_load_f32(int dtype, const void *p, int64_t i) {
    return dtype == ER_BF16 ? er_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static inline void er_store_f32(int dtype, void *p, int64_t i, float v) {
    if (dtype == ER_BF16) ((uint16_t *)p)[i] = er_f32_to_bf16(v);
    else ((float *)p)[i] = v;
}

#endif
