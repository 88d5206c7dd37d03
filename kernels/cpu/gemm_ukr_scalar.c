/* gemm_ukr_scalar.c — portable C micro-kernel (4x8), used on CPUs without AVX2/AVX-512 and as a
 * readable statement of what every micro-kernel computes. */
#include "kernels/cpu/gemm_internal.h"

#define MR 4
#define NR 8
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-vectorize")))
#endif
static void ukr_4x8(long kc, const float *restrict Ap, const float *restrict Bp, float *C, long ldc,
                    float alpha, float beta, int mr, int nr) {
    float acc[MR][NR] = {{0}};
    /* Inner loops fully unrolled and loop vectorisation off: acc stays in registers (the SLP
     * pass may still pack the j row into one SIMD op) instead of GCC vectorising across p with
     * shuffles, which measured 1 GFLOP/s. */
    for (long p = 0; p < kc; p++, Ap += MR, Bp += NR)
#pragma GCC unroll 4
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
            for (int j = 0; j < NR; j++) acc[i][j] += Ap[i] * Bp[j];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float r = alpha * acc[i][j];
            C[i * ldc + j] = beta != 0.0f ? r + beta * C[i * ldc + j] : r;
        }
}

static const gemm_kernel kernels[] = {{"scalar-4x8", "scalar", 4, 8, 128, 256, 1024, ukr_4x8, NULL}};

const gemm_kernel *gemm_kernels_scalar(int *count) {
    *count = 1;
    return kernels;
}
