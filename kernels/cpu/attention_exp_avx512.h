/* attention_exp_avx512.h — the exp and softmax-row pieces shared by the fused attention kernels
 * (attention_avx512.c fp32, attention_bf16.c bf16). Included inside their AVX-512 target region. */
#ifndef ENDORET_ATTENTION_EXP_AVX512_H
#define ENDORET_ATTENTION_EXP_AVX512_H

static inline __mmask16 tmask(int n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* exp16 of simd_avx512.c (same polynomial and range reduction, exp_vec of cpu_kernels.h). */
static inline __m512 fexp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.7f), lo = _mm512_set1_ps(-87.3f);
    __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
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

/* Row max, then e = exp(s - max) in place with a 16-lane sum (the order of softmax_row_avx512);
 * returns the sum and sets *mx (a fully masked row cannot occur: no mask on this path). */
static inline float exp_row(float *s, int n, float *mx) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tmask(n - j), s + j));
    float rm = _mm512_reduce_max_ps(m);
    const __m512 vm = _mm512_set1_ps(rm);
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = tmask(n - j);
        __m512 e = _mm512_maskz_mov_ps(k, fexp16(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, k, s + j), vm)));
        _mm512_mask_storeu_ps(s + j, k, e);
        acc = _mm512_add_ps(acc, e);
    }
    *mx = rm;
    return _mm512_reduce_add_ps(acc);
}

#endif
