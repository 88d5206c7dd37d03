/* simd_avx512.c — AVX-512 versions of the transcendental-heavy elementwise kernels: exact-erf GELU
 * forward/backward, the softmax row and the per-head products of attention (plus AVX2 GELU for
 * CPUs without AVX-512). Compiled with a target attribute (like
 * gemm_ukr_avx512.c), so a generic x86-64 build still contains them; callers use them only when
 * cpu_simd() (run-time CPU check) says so. The scalar references are erf_pw / exp_vec in
 * cpu_kernels.h and the loops that call these functions; tests/kernels/test_simd.c compares them.
 * Same algorithms as the references (same polynomials, same range reduction), FMA where the
 * references round twice, so results agree to ~1 ulp, and every element depends only on its own
 * input: results do not depend on the thread count. */
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"

/* ENDORET_NO_SIMD=1: the scalar references everywhere in these kernels; ENDORET_NO_AVX512=1: the
 * AVX2 GELU and sgemm-based attention, as on a CPU without AVX-512 (sgemm picks its own kernel). */
int cpu_simd(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("ENDORET_NO_SIMD"), *e5 = getenv("ENDORET_NO_AVX512");
        cached = cpu_has_avx512() && !(e && *e && *e != '0') && !(e5 && *e5 && *e5 != '0');
    }
    return cached;
}

int cpu_simd_avx2(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("ENDORET_NO_SIMD");
        cached = cpu_has_avx2_fma() && !(e && *e && *e != '0');
    }
    return cached;
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,fma")
#include <immintrin.h>

#include "kernels/cpu/vec_avx512.h" /* exp16, tail_mask */

/* erf_pw on 16 lanes: each lane's piece index selects its coefficients with a permute. */
static inline __m512 erf16(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 a = _mm512_andnot_ps(sign, x);
    __m512 ac = _mm512_min_ps(_mm512_set1_ps(4.0f), a); /* NaN passes through */
    __m512i k = _mm512_cvttps_epi32(_mm512_add_ps(ac, ac));
    __mmask16 first = _mm512_cmpeq_epi32_mask(k, _mm512_setzero_si512());
    __m512 ctr = _mm512_fmadd_ps(_mm512_cvtepi32_ps(k), _mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
    __m512 z = _mm512_mask_blend_ps(first, _mm512_sub_ps(ac, ctr), _mm512_mul_ps(ac, ac));
    __m512 r = _mm512_permutexvar_ps(k, _mm512_loadu_ps(erf_poly[ERF_DEG]));
    for (int j = ERF_DEG - 1; j >= 0; j--)
        r = _mm512_fmadd_ps(r, z, _mm512_permutexvar_ps(k, _mm512_loadu_ps(erf_poly[j])));
    r = _mm512_mask_mul_ps(r, first, r, ac);
    return _mm512_or_ps(r, _mm512_and_ps(sign, x)); /* erf is odd */
}

__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
void erf_avx512(int64_t n, const float *x, float *y) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, erf16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

#define SQRT1_2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
void gelu_forward_avx512(int64_t n, const float *x, float *y) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), s = _mm512_set1_ps(SQRT1_2);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 e = erf16(_mm512_mul_ps(v, s));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e)));
    }
}

/* gx += gy * (Phi(x) + x phi(x)), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi(x) = exp(-x^2/2) / sqrt(2 pi) */
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
void gelu_backward_avx512(int64_t n, const float *x, const float *gy, float *gx) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f), s = _mm512_set1_ps(SQRT1_2);
    const __m512 mhalf = _mm512_set1_ps(-0.5f), c = _mm512_set1_ps(INV_SQRT_2PI);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 cdf = _mm512_mul_ps(half, _mm512_add_ps(one, erf16(_mm512_mul_ps(v, s))));
        __m512 pdf = _mm512_mul_ps(c, exp16(_mm512_mul_ps(_mm512_mul_ps(mhalf, v), v)));
        __m512 d = _mm512_fmadd_ps(v, pdf, cdf);
        __m512 g = _mm512_maskz_loadu_ps(m, gy + i), o = _mm512_maskz_loadu_ps(m, gx + i);
        _mm512_mask_storeu_ps(gx + i, m, _mm512_fmadd_ps(g, d, o));
    }
}

/* Row max, exp(s - max) stored with a 16-lane float sum (fixed order), scale by 1/sum. */
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
float softmax_row_avx512(float *s, int64_t n) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 mx = ninf;
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 m = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(ninf, m, s + j));
    }
    float rm = _mm512_reduce_max_ps(mx);
    if (rm == -INFINITY) { /* fully masked row: output 0, no gradient */
        for (int64_t j = 0; j < n; j++) s[j] = 0.0f;
        return INFINITY;
    }
    const __m512 vm = _mm512_set1_ps(rm);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 m = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);
        __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, m, s + j), vm)));
        _mm512_mask_storeu_ps(s + j, m, e);
        acc = _mm512_add_ps(acc, e);
    }
    float sum = _mm512_reduce_add_ps(acc);
    const __m512 inv = _mm512_set1_ps(1.0f / sum);
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 m = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(s + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), inv));
    }
    return rm + logf(sum);
}

/* ---- attention matrix products (D = head width, a multiple of 16, at most 64) ----
 * Per (batch, head) the products are small (197 x 197 x 64 for ViT at 224^2), where sgemm's
 * packing and edge tiles cost as much as the arithmetic. These kernels read A elements straight
 * from their strided rows (one broadcast each) and B rows as whole vectors, so only B^T of the
 * "A B^T" form needs packing (once per head, by the caller). */


/* C[i][j] (+)= alpha sum_d A[i lda + d] Bt[d ldb + j]: MR rows x NV vectors of 16 columns. */
#define ABT_TILE(MR, NV)                                                                          \
    static inline void abt_##MR##x##NV(int D, int nc, float alpha, const float *A, int64_t lda,    \
                                       const float *Bt, int64_t ldb, float *C, int64_t ldc, int acc) { \
        __m512 c[MR][NV];                                                                         \
        for (int r = 0; r < MR; r++)                                                              \
            for (int v = 0; v < NV; v++) c[r][v] = _mm512_setzero_ps();                           \
        for (int d = 0; d < D; d++) {                                                             \
            __m512 b[NV];                                                                         \
            for (int v = 0; v < NV; v++) b[v] = _mm512_loadu_ps(Bt + d * ldb + 16 * v);           \
            for (int r = 0; r < MR; r++) {                                                        \
                __m512 a = _mm512_set1_ps(A[r * lda + d]);                                        \
                for (int v = 0; v < NV; v++) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);         \
            }                                                                                     \
        }                                                                                         \
        const __m512 al = _mm512_set1_ps(alpha);                                                  \
        for (int r = 0; r < MR; r++)                                                              \
            for (int v = 0; v < NV; v++) {                                                        \
                __mmask16 m = tail_mask(nc - 16 * v);                                             \
                float *cp = C + r * ldc + 16 * v;                                                 \
                __m512 o = _mm512_mul_ps(al, c[r][v]);                                            \
                if (acc) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(m, cp));                      \
                _mm512_mask_storeu_ps(cp, m, o);                                                  \
            }                                                                                     \
    }
ABT_TILE(8, 3)
ABT_TILE(8, 2)
ABT_TILE(8, 1)
ABT_TILE(1, 3)
ABT_TILE(1, 2)
ABT_TILE(1, 1)

/* Bt [D][ldt] = B^T of a [N x D] block with rows of stride ldb, columns N..ldt-1 zeroed: 16 rows
 * at a time, one gather per d (a strided scalar loop cost ~15 % of the attention products). */
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
void pack_transposed_avx512(int N, int D, const float *B, int64_t ldb, float *Bt, int64_t ldt) {
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)ldb));
    for (int j = 0; j < ldt; j += 16) {
        __mmask16 m = tail_mask(N - j > 0 ? N - j : 0);
        const float *b = B + (int64_t)j * ldb;
        for (int d = 0; d < D; d++)
            _mm512_storeu_ps(Bt + d * ldt + j, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, rows, b + d, 4));
    }
}

/* C [M x N] (+)= alpha A B^T with A rows of length D (stride lda) and Bt = B^T packed [D][ldb],
 * ldb >= N rounded up to 16 (columns past N are read, never stored). */
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
void attn_gemm_abt_avx512(int M, int N, int D, float alpha, const float *A, int64_t lda,
                          const float *Bt, int64_t ldb, float *C, int64_t ldc, int acc) {
    for (int j = 0; j < N; j += 48) {
        int nc = N - j < 48 ? N - j : 48, nv = (nc + 15) / 16;
        int i = 0;
        for (; i + 8 <= M; i += 8) {
            const float *a = A + i * lda;
            float *c = C + i * ldc + j;
            if (nv == 3) abt_8x3(D, nc, alpha, a, lda, Bt + j, ldb, c, ldc, acc);
            else if (nv == 2) abt_8x2(D, nc, alpha, a, lda, Bt + j, ldb, c, ldc, acc);
            else abt_8x1(D, nc, alpha, a, lda, Bt + j, ldb, c, ldc, acc);
        }
        for (; i < M; i++) {
            const float *a = A + i * lda;
            float *c = C + i * ldc + j;
            if (nv == 3) abt_1x3(D, nc, alpha, a, lda, Bt + j, ldb, c, ldc, acc);
            else if (nv == 2) abt_1x2(D, nc, alpha, a, lda, Bt + j, ldb, c, ldc, acc);
            else abt_1x1(D, nc, alpha, a, lda, Bt + j, ldb, c, ldc, acc);
        }
    }
}

/* C[i][0:16 NV] (+)= alpha sum_j A(i, j) B[j ldb + 0:16 NV], A(i, j) = A[i ars + j acs]. */
#define AB_TILE(MR, NV)                                                                           \
    static inline void ab_##MR##x##NV(int K, float alpha, const float *A, int64_t ars, int64_t acs, \
                                      const float *B, int64_t ldb, float *C, int64_t ldc, int acc) { \
        __m512 c[MR][NV];                                                                         \
        for (int r = 0; r < MR; r++)                                                              \
            for (int v = 0; v < NV; v++) c[r][v] = _mm512_setzero_ps();                           \
        for (int j = 0; j < K; j++) {                                                             \
            __m512 b[NV];                                                                         \
            for (int v = 0; v < NV; v++) b[v] = _mm512_loadu_ps(B + j * ldb + 16 * v);            \
            for (int r = 0; r < MR; r++) {                                                        \
                __m512 a = _mm512_set1_ps(A[r * ars + j * acs]);                                  \
                for (int v = 0; v < NV; v++) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);         \
            }                                                                                     \
        }                                                                                         \
        tile_store(&c[0][0], MR, NV, &alpha, 0, C, ldc, acc);                                     \
    }
AB_TILE(6, 4)
AB_TILE(6, 3)
AB_TILE(6, 2)
AB_TILE(6, 1)
AB_TILE(1, 4)
AB_TILE(1, 3)
AB_TILE(1, 2)
AB_TILE(1, 1)

/* C [M x D] (+)= alpha A B, A(i, j) = A[i ars + j acs] (a row-major A or a transposed view),
 * B [K x D] with rows of stride ldb; D a multiple of 16, at most 64. */
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
void attn_gemm_ab_avx512(int M, int D, int K, float alpha, const float *A, int64_t ars, int64_t acs,
                         const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
    int nv = D / 16, i = 0;
    for (; i + 6 <= M; i += 6) {
        const float *a = A + i * ars;
        float *c = C + i * ldc;
        switch (nv) {
        case 4: ab_6x4(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        case 3: ab_6x3(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        case 2: ab_6x2(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        default: ab_6x1(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        }
    }
    for (; i < M; i++) {
        const float *a = A + i * ars;
        float *c = C + i * ldc;
        switch (nv) {
        case 4: ab_1x4(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        case 3: ab_1x3(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        case 2: ab_1x2(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        default: ab_1x1(K, alpha, a, ars, acs, B, ldb, c, ldc, acc); break;
        }
    }
}

#pragma GCC pop_options

/* ---- AVX2 + FMA versions of the GELU kernels, for CPUs without AVX-512 ----
 * The portable loops over erf_pw vectorise only with gathers (7 table lookups per element, ~4x
 * slower than the old Abramowitz-Stegun erf); here the 9 pieces' coefficients come from two
 * 8-entry permutes (pieces 0-7) and a blend for piece 8 (|x| >= 4: erf = 1). */
#pragma GCC push_options
#pragma GCC target("avx2,fma")

static inline __m256 exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.7f), lo = _mm256_set1_ps(-87.3f);
    __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.3888889e-3f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3333333e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1666667e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666667e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n in the exponent bits; n in [-126, 128]: 2^128 as 2^127 * 2 */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i big = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));
    ni = _mm256_min_epi32(ni, _mm256_set1_epi32(127));
    p = _mm256_blendv_ps(p, _mm256_add_ps(p, p), _mm256_castsi256_ps(big));
    __m256 sc = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(p, sc);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

static inline __m256 erf8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, x);
    __m256 ac = _mm256_min_ps(_mm256_set1_ps(4.0f), a); /* NaN -> NaN (second operand) */
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    ac = _mm256_blendv_ps(ac, _mm256_set1_ps(4.0f), nan);
    __m256i k = _mm256_cvttps_epi32(_mm256_add_ps(ac, ac));
    __m256 last = _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_set1_epi32(8)));
    __m256 first = _mm256_castsi256_ps(_mm256_cmpeq_epi32(k, _mm256_setzero_si256()));
    __m256 ctr = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k), _mm256_set1_ps(0.5f), _mm256_set1_ps(0.25f));
    __m256 z = _mm256_blendv_ps(_mm256_sub_ps(ac, ctr), _mm256_mul_ps(ac, ac), first);
    __m256 r = _mm256_permutevar8x32_ps(_mm256_loadu_ps(erf_poly[ERF_DEG]), k);
    for (int j = ERF_DEG - 1; j >= 0; j--)
        r = _mm256_fmadd_ps(r, z, _mm256_permutevar8x32_ps(_mm256_loadu_ps(erf_poly[j]), k));
    r = _mm256_blendv_ps(r, _mm256_mul_ps(r, ac), first);
    r = _mm256_blendv_ps(r, _mm256_set1_ps(1.0f), last);
    r = _mm256_or_ps(r, _mm256_and_ps(sign, x));
    return _mm256_blendv_ps(r, x, nan);
}

static inline __m256 load8(const float *p, int n) {
    if (n >= 8) return _mm256_loadu_ps(p);
    float t[8] = {0};
    for (int i = 0; i < n; i++) t[i] = p[i];
    return _mm256_loadu_ps(t);
}

static inline void store8(float *p, __m256 v, int n) {
    if (n >= 8) { _mm256_storeu_ps(p, v); return; }
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int i = 0; i < n; i++) p[i] = t[i];
}

__attribute__((target("avx2,fma")))
void erf_avx2(int64_t n, const float *x, float *y) {
    for (int64_t i = 0; i < n; i += 8) {
        int m = n - i < 8 ? (int)(n - i) : 8;
        store8(y + i, erf8(load8(x + i, m)), m);
    }
}

__attribute__((target("avx2,fma")))
void gelu_forward_avx2(int64_t n, const float *x, float *y) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), s = _mm256_set1_ps(SQRT1_2);
    for (int64_t i = 0; i < n; i += 8) {
        int m = n - i < 8 ? (int)(n - i) : 8;
        __m256 v = load8(x + i, m);
        __m256 e = erf8(_mm256_mul_ps(v, s));
        store8(y + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e)), m);
    }
}

__attribute__((target("avx2,fma")))
void gelu_backward_avx2(int64_t n, const float *x, const float *gy, float *gx) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), s = _mm256_set1_ps(SQRT1_2);
    const __m256 mhalf = _mm256_set1_ps(-0.5f), c = _mm256_set1_ps(INV_SQRT_2PI);
    for (int64_t i = 0; i < n; i += 8) {
        int m = n - i < 8 ? (int)(n - i) : 8;
        __m256 v = load8(x + i, m);
        __m256 cdf = _mm256_mul_ps(half, _mm256_add_ps(one, erf8(_mm256_mul_ps(v, s))));
        __m256 pdf = _mm256_mul_ps(c, exp8(_mm256_mul_ps(_mm256_mul_ps(mhalf, v), v)));
        __m256 d = _mm256_fmadd_ps(v, pdf, cdf);
        store8(gx + i, _mm256_fmadd_ps(load8(gy + i, m), d, load8(gx + i, m)), m);
    }
}
#pragma GCC pop_options

#else
/* Not x86-64 GCC/Clang: cpu_simd() is 0, so these are never called. */
void erf_avx2(int64_t n, const float *x, float *y) { (void)n; (void)x; (void)y; }
void gelu_forward_avx2(int64_t n, const float *x, float *y) { (void)n; (void)x; (void)y; }
void gelu_backward_avx2(int64_t n, const float *x, const float *gy, float *gx) { (void)n; (void)x; (void)gy; (void)gx; }
void erf_avx512(int64_t n, const float *x, float *y) { (void)n; (void)x; (void)y; }
void gelu_forward_avx512(int64_t n, const float *x, float *y) { (void)n; (void)x; (void)y; }
void gelu_backward_avx512(int64_t n, const float *x, const float *gy, float *gx) { (void)n; (void)x; (void)gy; (void)gx; }
float softmax_row_avx512(float *s, int64_t n) { (void)s; (void)n; return 0.0f; }
void pack_transposed_avx512(int N, int D, const float *B, int64_t ldb, float *Bt, int64_t ldt) {
    (void)N, (void)D, (void)B, (void)ldb, (void)Bt, (void)ldt;
}
void attn_gemm_abt_avx512(int M, int N, int D, float alpha, const float *A, int64_t lda,
                          const float *Bt, int64_t ldb, float *C, int64_t ldc, int acc) {
    (void)M, (void)N, (void)D, (void)alpha, (void)A, (void)lda, (void)Bt, (void)ldb, (void)C, (void)ldc, (void)acc;
}
void attn_gemm_ab_avx512(int M, int D, int K, float alpha, const float *A, int64_t ars, int64_t acs,
                         const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
    (void)M, (void)D, (void)K, (void)alpha, (void)A, (void)ars, (void)acs, (void)B, (void)ldb, (void)C, (void)ldc, (void)acc;
}
#endif
