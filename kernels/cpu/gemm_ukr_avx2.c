/* gemm_ukr_avx2.c — AVX2+FMA micro-kernel (6x16: 12 ymm accumulators + 2 B vectors + 1 broadcast
 * of the 16 ymm registers), the fallback for x86 CPUs without AVX-512. Compiled with a target
 * attribute and chosen at run time, like the AVX-512 one. */
#include "kernels/cpu/gemm_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#define MR 6
#define NV 2
static void ukr_6x16(long kc, const float *restrict Ap, const float *restrict Bp, float *C, long ldc,
                     float alpha, float beta, int mr, int nr) {
    __m256 c[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) c[i][v] = _mm256_setzero_ps();
    for (long p = 0; p < kc; p++) {
        __m256 b0 = _mm256_load_ps(Bp), b1 = _mm256_load_ps(Bp + 8);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_broadcast_ss(Ap + i);
            c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
        }
        Ap += MR;
        Bp += 8 * NV;
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    if (mr == MR && nr == 8 * NV) {
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) {
                float *cp = C + i * ldc + 8 * v;
                __m256 r = _mm256_mul_ps(va, c[i][v]);
                if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cp), r);
                _mm256_storeu_ps(cp, r);
            }
        return;
    }
    /* Edge tile: spill to a small buffer, then update only the valid part of C. */
    /* (Unrolled, so c is never indexed at run time and stays in registers in the main loop.) */
    float t[MR * 8 * NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(t + i * 8 * NV + 8 * v, c[i][v]);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float r = alpha * t[i * 8 * NV + j];
            C[i * ldc + j] = beta != 0.0f ? r + beta * C[i * ldc + j] : r;
        }
}
#pragma GCC pop_options

static const gemm_kernel kernels[] = {{"avx2-6x16", "avx2", 6, 16, 144, 256, 2048, ukr_6x16, NULL}};

const gemm_kernel *gemm_kernels_avx2(int *count) {
    *count = 1;
    return kernels;
}
#else
const gemm_kernel *gemm_kernels_avx2(int *count) {
    *count = 0;
    return 0;
}
#endif
