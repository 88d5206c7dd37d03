/* vec_avx512.h — AVX-512 vector helpers shared by the CPU kernels (simd_avx512.c, the fused
 * attention kernels). Include inside an AVX-512 target region, after <immintrin.h>. */
#ifndef ENDORET_VEC_AVX512_H
#define ENDORET_VEC_AVX512_H

#include <math.h>
#include <stdint.h>

/* Lanes [0, n) of 16 (n <= 0: none). */
static inline __mmask16 tail_mask(int n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* exp_vec of cpu_kernels.h on 16 lanes: n = round(x / ln2), r = x - n ln2 (two-part ln2),
 * degree-6 Taylor polynomial, times 2^n by scalef. 0 below -87.3, +inf above 88.7, NaN kept. */
static inline __m512 exp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.7f), lo = _mm512_set1_ps(-87.3f);
    __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x)); /* NaN passes through (second operand) */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.3888889e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3333333e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1666667e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666667e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512 y = _mm512_scalef_ps(p, n);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
}

/* kernels/dtype.h's er_f32_to_bf16 on 16 lanes, with integer arithmetic (not vcvtneps2bf16, which
 * flushes subnormals): NaN lanes -> (u >> 16) | 0x40, others (u + 0x7FFF + lsb) >> 16. And back
 * (exact). cast.c's vector path and the bf16 attention's stores. Needs AVX512BW. */
static inline __m256i bf16x16_narrow(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r); /* truncating pack: every lane is < 2^16 */
}
static inline __m512 bf16x16_widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

/* The store of an MR x 16 NV register tile c[r * nv + v] (MR, NV compile-time constants at the
 * call: always inlined and unrolled): C[r][16 v ..] = al[r * als] c (+ C when acc). als = 0: one
 * scale for every row. Shared by the GEMM-like tiles of simd_avx512.c and the fused attention. */
static inline __attribute__((always_inline)) void tile_store(const __m512 *c, int mr, int nv, const float *al,
                                                             int als, float *C, int64_t ldc, int acc) {
    for (int r = 0; r < mr; r++) {
        const __m512 a = _mm512_set1_ps(al[r * als]);
        for (int v = 0; v < nv; v++) {
            float *cp = C + r * ldc + 16 * v;
            __m512 o = _mm512_mul_ps(a, c[r * nv + v]);
            if (acc) o = _mm512_add_ps(o, _mm512_loadu_ps(cp));
            _mm512_storeu_ps(cp, o);
        }
    }
}

#endif
