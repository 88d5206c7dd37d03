/* gemm_ukr_avx512.c — AVX-512 FMA micro-kernels for sgemm (see gemm_internal.h for the packed
 * layouts). Compiled with a target attribute, so a build for a CPU without AVX-512 (e.g.
 * -march=x86-64-v3) still contains them; gemm.c calls them only after a runtime CPU check.
 *
 * One tile: MR rows x NV*16 columns of C live in MR*NV zmm accumulators for the whole kc loop.
 * Per depth step: NV vector loads of B, MR broadcasts of A, MR*NV FMAs. 32 zmm registers bound
 * MR*NV + NV <= 31 or so. Four shapes are compiled in: on full tiles they run at the same speed
 * (~113 GFLOP/s on one Zen 4 core with data in L1, bench/RESULTS_gemm.md), so gemm.c picks, per
 * call, the one whose tiles pad the matrix least; 8x48 is first (ties, and 8-row A panels pack
 * with an 8x8 transpose). */
#include "kernels/cpu/gemm_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,fma")
#include <immintrin.h>

/* Each variant is the same template (gemm_ukr_avx512_tile.h) with compile-time MR and NV, so the
 * loops unroll fully and the MR x NV accumulators stay in registers. */
#define MR 14
#define NV 2
#include "kernels/cpu/gemm_ukr_avx512_tile.h"
#define MR 12
#define NV 2
#include "kernels/cpu/gemm_ukr_avx512_tile.h"
#define MR 8
#define NV 3
#include "kernels/cpu/gemm_ukr_avx512_tile.h"
#define MR 6
#define NV 4
#include "kernels/cpu/gemm_ukr_avx512_tile.h"
#pragma GCC pop_options

/* Blocking: the A block (mc x kc, ~240 KB) stays in the private L2 (1 MiB on Zen 4) while the
 * B micro-panels stream past it, the packed B block (kc x nc, <= 6 MB) in the 32 MiB L3. kc = 384
 * measured 1-5 % faster than 256 on the k-heavy ViT shapes (fewer passes over C) and equal on
 * 1024^3 (bench/RESULTS_gemm.md); the kernels are at peak in L1 and L2 alike. */
static const gemm_kernel kernels[] = {
    {"avx512-8x48", "avx512", 8, 48, 160, 384, 4080, ukr_avx512_8x3, NULL},
    {"avx512-6x64", "avx512", 6, 64, 144, 384, 4096, ukr_avx512_6x4, NULL},
    {"avx512-14x32", "avx512", 14, 32, 168, 384, 4096, ukr_avx512_14x2, NULL},
    {"avx512-12x32", "avx512", 12, 32, 144, 384, 4096, ukr_avx512_12x2, NULL},
};

const gemm_kernel *gemm_kernels_avx512(int *count) {
    *count = (int)(sizeof kernels / sizeof kernels[0]);
    return kernels;
}
#else
const gemm_kernel *gemm_kernels_avx512(int *count) {
    *count = 0;
    return 0;
}
#endif
