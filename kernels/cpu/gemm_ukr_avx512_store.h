/* gemm_ukr_avx512_store.h — the write-out shared by the AVX-512 micro-kernel templates
 * (gemm_ukr_avx512_tile.h fp32, gemm_ukr_avx512bf16_tile.h bf16): C = alpha * acc + beta * C for an
 * MR x 16*NV tile of fp32 accumulators `c[MR][NV]`, beta == 0 never reading C, edge tiles masked.
 * A fragment, included inside the kernel body: it expects MR, NV, c, C, ldc, alpha, beta, mr, nr. */
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
