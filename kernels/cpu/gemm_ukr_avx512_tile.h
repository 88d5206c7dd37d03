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

    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    if (mr == MR && nr == 16 * NV) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            float *cr = C + i * ldc;
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) {
                __m512 r = _mm512_mul_ps(va, c[i][v]);
                if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr + 16 * v), r);
                _mm512_storeu_ps(cr + 16 * v, r);
            }
        }
        return;
    }
    /* Edge tile: rows past mr are skipped, columns past nr are masked off (never read nor written). */
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
        if (i >= mr) break;
        float *cr = C + i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            int cols = nr - 16 * v;
            if (cols <= 0) break;
            __mmask16 m = cols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << cols) - 1u);
            __m512 r = _mm512_mul_ps(va, c[i][v]);
            if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, cr + 16 * v), r);
            _mm512_mask_storeu_ps(cr + 16 * v, m, r);
        }
    }
}

#undef UKR_NAME
#undef UKR_NAME2
#undef MR
#undef NV
