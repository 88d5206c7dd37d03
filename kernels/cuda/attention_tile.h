/* attention_tile.h — what the two tensor-core attention files share (internal to kernels/cuda):
 * attention_mma.cu (wmma, the default where the chooser takes the tensor cores) and
 * attention_flash.cu (mma.sync with the scores in registers, ENDORET_CUDA_ATTENTION=flash).
 * Both run blocks of AM_WARPS warps, each warp owning 16 query (or key) rows; read q, k, v, o, dO
 * as fp32 or bf16 storage through the same accessors; and stage a head's rows in shared memory as
 * bf16 [rows][D+8] (rows padded by 8 so fragment loads do not hit one bank). */
#ifndef ENDORET_ATTENTION_TILE_H
#define ENDORET_ATTENTION_TILE_H

#include <cuda_bf16.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/cuda_common.h"

typedef __nv_bfloat16 bf16;

#define AM_WARPS 4
#define AM_ROWS (AM_WARPS * 16) /* query (or key) rows per block */

/* A statement for each head dim the tensor-core paths take (D = 16, 32, 48, 64; chosen by
 * cu_attention_mma_fits): CALL(DD) with DD the constant. */
#define AM_HEAD_DIMS(CALL)                                                                                             \
    switch (D) {                                                                                                       \
    case 16: CALL(16); break;                                                                                          \
    case 32: CALL(32); break;                                                                                          \
    case 48: CALL(48); break;                                                                                          \
    default: CALL(64); break;                                                                                          \
    }

/* (b, h, t) strides of each operand, in elements */
struct am_strides {
    int64_t q[3], k[3], v[3], o[3], go[3], gq[3], gk[3], gv[3];
};

__host__ __device__ static inline int am_r16(int x) { return (x + 15) & ~15; }
__host__ __device__ static inline size_t am_al(size_t bytes) { return (bytes + 127) & ~(size_t)127; }

/* Storage of q, k, v, o and their gradients: fp32, or bf16 bits (uint16_t, rounded as kernels/dtype.h).
 * Four consecutive elements (one 16- or 8-byte access) as fp32, and back: a bf16 value widened and
 * rounded again is itself, so the bf16 kernels compute exactly what the fp32 ones do on widened copies. */
__device__ static inline float4 am_get4(const float *p) { return *(const float4 *)p; }
__device__ static inline float4 am_get4(const uint16_t *p) {
    const uint64_t w = *(const uint64_t *)p;
    return make_float4(cu_bf16_to_f32((uint16_t)w), cu_bf16_to_f32((uint16_t)(w >> 16)), cu_bf16_to_f32((uint16_t)(w >> 32)),
                       cu_bf16_to_f32((uint16_t)(w >> 48)));
}
__device__ static inline void am_put4(float *p, float4 y) { *(float4 *)p = y; }
__device__ static inline void am_put4(uint16_t *p, float4 y) {
    *(uint64_t *)p = (uint64_t)cu_f32_to_bf16(y.x) | (uint64_t)cu_f32_to_bf16(y.y) << 16 |
                     (uint64_t)cu_f32_to_bf16(y.z) << 32 | (uint64_t)cu_f32_to_bf16(y.w) << 48;
}
__device__ static inline float am_get(const float *p) { return *p; }
__device__ static inline float am_get(const uint16_t *p) { return cu_bf16_to_f32(*p); }

/* rows [r0, r0 + nrows) of a (t, d)-strided head -> bf16 [nrows][D+8], zero past n_valid;
 * threads t of nt, vector reads, four in flight per thread */
template <int D, class T>
__device__ static inline void am_load(bf16 *dst, const T *src, int64_t ts, int r0, int nrows, int n_valid,
                                      int t, int nt) {
    constexpr int V4 = D / 4;
    const int total = nrows * V4;
    for (int base = t; base < total; base += 4 * nt) {
        float4 x[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int c = base + u * nt, r = c / V4;
            x[u] = c < total && r0 + r < n_valid ? am_get4(src + (int64_t)(r0 + r) * ts + (c - r * V4) * 4)
                                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int c = base + u * nt, r = c / V4;
            if (c >= total) break;
            bf16 *d = dst + (size_t)r * (D + 8) + (c - r * V4) * 4;
            d[0] = __float2bfloat16(x[u].x);
            d[1] = __float2bfloat16(x[u].y);
            d[2] = __float2bfloat16(x[u].z);
            d[3] = __float2bfloat16(x[u].w);
        }
    }
}

/* Kernels above 48 KiB of dynamic shared memory must opt in, once per size they grow to. */
template <class K> static bool am_smem_optin(K kern, size_t bytes, size_t *done) {
    if (bytes <= *done || bytes <= 48 * 1024) return true;
    if (CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes))) return false;
    *done = bytes;
    return true;
}

/* The flash kernels (attention_flash.cu), for attention_mma.cu's entry points, which have checked
 * the shape (cu_attention_mma_fits) and the vector alignment. Forward: o and lse. Backward: the
 * gradients that are not NULL, added into (or written, accumulate = false), with no workspace;
 * deterministic. */
void cu_attention_flash_fwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const float *k,
                            const float *v, const am_strides &s, float *o, float *lse);
void cu_attention_flash_fwd(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const uint16_t *k,
                            const uint16_t *v, const am_strides &s, uint16_t *o, float *lse);
void cu_attention_flash_bwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const float *k,
                            const float *v, const float *o, const float *go, const float *lse, const am_strides &s,
                            float *gq, float *gk, float *gv, bool accumulate);
void cu_attention_flash_bwd(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const uint16_t *k,
                            const uint16_t *v, const uint16_t *o, const uint16_t *go, const float *lse,
                            const am_strides &s, uint16_t *gq, uint16_t *gk, uint16_t *gv, bool accumulate);

#endif
