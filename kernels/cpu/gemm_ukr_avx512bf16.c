/* gemm_ukr_avx512bf16.c — AVX512_BF16 micro-kernels (vdpbf16ps) for sgemm in SGEMM_BF16
 * precision: packed panels hold bf16 depth pairs (gemm_pack_bf16.c), accumulators are fp32.
 * Compiled with a target attribute; gemm.c calls them only when cpu_has_avx512_bf16().
 *
 * What vdpbf16ps computes, per fp32 lane i (Intel SDM, "VDPBF16PS"):
 *   acc += a[2i+1]*b[2i+1];  acc += a[2i]*b[2i]   (odd element of the pair first),
 * each step an fp32 fused multiply-add rounded to nearest even (MXCSR ignored), bf16 inputs that
 * are denormal read as zero and denormal results flushed to zero. A bf16 x bf16 product is exact
 * in fp32 (8+8 significant bits), so each step is one correctly rounded fp32 addition of an exact
 * product: the same arithmetic as the fp32 FMA kernels on bf16-rounded panels (the reference
 * path), except (1) the order inside a pair (depth 2q+1 before 2q, where the reference adds 2q
 * first) and (2) denormals flushed. docs/gemm.md gives what this means for results; the tests
 * measure which order this CPU really uses (AMD's implementation may differ from Intel's text). */
#include <stdint.h>

#include "kernels/cpu/gemm_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma")
#include <immintrin.h>

#define MR 8
#define NV 3
#include "kernels/cpu/gemm_ukr_avx512bf16_tile.h"
#define MR 6
#define NV 4
#include "kernels/cpu/gemm_ukr_avx512bf16_tile.h"
#define MR 14
#define NV 2
#include "kernels/cpu/gemm_ukr_avx512bf16_tile.h"
#define MR 12
#define NV 2
#include "kernels/cpu/gemm_ukr_avx512bf16_tile.h"
#pragma GCC pop_options

/* Blocking: a bf16 panel takes half the bytes of an fp32 one, so the depth block doubles
 * (kc = 768) for the same L2 footprint of the A block; chosen by measurement (RESULTS_gemm.md). */
static const gemm_kernel kernels[] = {
    {"avx512bf16-8x48", "avx512bf16", 8, 48, 160, 768, 4080, NULL, ukr_bf16_8x3},
    {"avx512bf16-6x64", "avx512bf16", 6, 64, 144, 768, 4096, NULL, ukr_bf16_6x4},
    {"avx512bf16-14x32", "avx512bf16", 14, 32, 168, 768, 4096, NULL, ukr_bf16_14x2},
    {"avx512bf16-12x32", "avx512bf16", 12, 32, 144, 768, 4096, NULL, ukr_bf16_12x2},
};

const gemm_kernel *gemm_kernels_avx512bf16(int *count) {
    *count = (int)(sizeof kernels / sizeof kernels[0]);
    return kernels;
}
#else
const gemm_kernel *gemm_kernels_avx512bf16(int *count) {
    *count = 0;
    return 0;
}
#endif
