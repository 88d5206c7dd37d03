/* gemm_ukr_avx512_tile.h — template of one AVX-512 micro-kernel, included by gemm_ukr_avx512.c
 * once per tile shape with MR (rows) and NV (16-float vectors per row) defined; defines
 * ukr_avx512_<MR>x<NV> and undefines MR/NV. Needs the avx512f+fma target already enabled. */
#define UKR_NAME2(a, b) ukr_avx512_##a##x##b
#define UKR_NAME(a, b) UKR_NAME2(a, b)

static void UKR_NAME(MR, NV)(long kc, const float *restrict Ap, const float *restrict Bp, float *C,
                            long ldc, float alpha, float beta, int mr, int nr) {
    __m512 c[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[i][v] = _mm512_setzero_ps();

    for (long p = 0; p < kc; p++) {
        __m512 b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) b[v] = _mm512_load_ps(Bp + 16 * v);
        _mm_prefetch((const char *)(Ap + 8 * MR), _MM_HINT_T0);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 a = _mm512_set1_ps(Ap[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_fmadd_ps(a, b[v], c[i][v]);
        }
        Ap += MR;
        Bp += 16 * NV;
    }

#include "kernels/cpu/gemm_ukr_avx512_store.h" /* C = alpha * c + beta * C, edges masked */
}

#undef UKR_NAME
#undef UKR_NAME2
#undef MR
#undef NV
