/* gemm_ukr_avx512bf16_tile.h — template of one AVX512_BF16 micro-kernel, included by
 * gemm_ukr_avx512bf16.c once per tile shape with MR (rows) and NV (16-column vectors) defined;
 * defines ukr_bf16_<MR>x<NV> and undefines MR/NV. Same register plan and C update as the fp32
 * template (gemm_ukr_avx512_tile.h), but each step consumes a depth *pair*: NV loads of 32 bf16
 * of B (16 columns x 2 depths), MR broadcasts of one 32-bit (depth 2q, 2q+1) word of A, MR*NV
 * vdpbf16ps — twice the multiply-adds of an FMA step for the same instruction count. */
#define UKR_NAME2(a, b) ukr_bf16_##a##x##b
#define UKR_NAME(a, b) UKR_NAME2(a, b)

static void UKR_NAME(MR, NV)(long kp, const uint16_t *restrict Ap, const uint16_t *restrict Bp,
                            float *C, long ldc, float alpha, float beta, int mr, int nr) {
    __m512 c[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[i][v] = _mm512_setzero_ps();

    const int32_t *A32 = (const int32_t *)Ap;
    for (long q = 0; q < kp; q++) {
        __m512bh b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) b[v] = (__m512bh)_mm512_load_si512(Bp + 32 * v);
        _mm_prefetch((const char *)(A32 + 8 * MR), _MM_HINT_T0);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32(A32[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) c[i][v] = _mm512_dpbf16_ps(c[i][v], a, b[v]);
        }
        A32 += MR;
        Bp += 32 * NV;
    }

#include "kernels/cpu/gemm_ukr_avx512_store.h" /* C = alpha * c + beta * C, edges masked */
}

#undef UKR_NAME
#undef UKR_NAME2
#undef MR
#undef NV
