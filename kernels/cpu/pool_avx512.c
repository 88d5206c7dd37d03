/* pool_avx512.c — max pooling's interior windows, 16 outputs of a row at a time (AVX-512), for
 * column strides 1 and 2 (ResNet's stem: 3x3, stride 2). The scalar loop in pool.c is the
 * reference and still does the edge windows; this one is branch-free: the scalar loop's
 * data-dependent branch per element (`v > m || isnan(v)`) mispredicts on activations, and was
 * 66 ms of a ResNet-50 training step. Same order over the window (rows, then columns), same rule
 * (a strictly greater value or a NaN takes over, so the first maximum wins ties and a NaN
 * propagates): values and argmax are identical to the reference (tests/kernels/test_pool_simd.c). */
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw")
#include <immintrin.h>

static inline __mmask16 lanes(int n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* 16 (n valid) inputs x[base + sw k], k < n, of one row (sw 1 or 2); lanes past n are 0. */
static inline __m512 load_strided(const float *x, int sw, int n) {
    if (sw == 1) return _mm512_maskz_loadu_ps(lanes(n), x);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    int span = 2 * n - 1; /* elements x[0 .. 2 (n - 1)] */
    __m512 lo = _mm512_maskz_loadu_ps(lanes(span), x), hi = _mm512_maskz_loadu_ps(lanes(span - 16), x + 16);
    return _mm512_permutex2var_ps(lo, even, hi);
}

void maxpool2d_interior_avx512(const pool2d_args *a, const float *xp, float *yp, int32_t *ap, int qa, int qb) {
    const int sw = a->sw;
    const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(sw));
    for (int p = 0; p < a->P; p++) {
        int h0 = p * a->sh - a->ph;
        int r0 = h0 < 0 ? -h0 : 0, r1 = h0 + a->R > a->H ? a->H - h0 : a->R;
        for (int q = qa; q < qb; q += 16) {
            int n = qb - q < 16 ? qb - q : 16;
            int w0 = q * sw - a->pw; /* window of output q: columns w0 .. w0 + S - 1, all inside */
            __m512 m = _mm512_setzero_ps();
            __m512i am = _mm512_setzero_si512();
            for (int r = r0; r < r1; r++) {
                const float *row = xp + (int64_t)(h0 + r) * a->W;
                for (int s = 0; s < a->S; s++) {
                    int base = w0 + s;
                    __m512 v = load_strided(row + base, sw, n);
                    __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((h0 + r) * a->W + base), step);
                    __mmask16 take = 0xffff; /* the window's first element always */
                    if (r > r0 || s > 0)
                        take = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                    m = _mm512_mask_mov_ps(m, take, v);
                    am = _mm512_mask_mov_epi32(am, take, idx);
                }
            }
            int64_t o = (int64_t)p * a->Q + q;
            _mm512_mask_storeu_ps(yp + o, lanes(n), m);
            _mm512_mask_storeu_epi32(ap + o, lanes(n), am);
        }
    }
}
#pragma GCC pop_options
#else
/* Not x86-64 GCC/Clang: cpu_simd() is 0, so this is never called. */
void maxpool2d_interior_avx512(const pool2d_args *a, const float *xp, float *yp, int32_t *ap, int qa, int qb) {
    (void)a, (void)xp, (void)yp, (void)ap, (void)qa, (void)qb;
}
#endif
