/* test_simd.c — the AVX-512 elementwise kernels (kernels/cpu/simd_avx512.c) against their scalar
 * references and against double precision: erf on a dense sweep (ulp error), GELU forward and
 * backward on odd lengths and unaligned pointers, the attention softmax row (masked rows too),
 * and thread-count independence of the dispatching CPU kernels. Skipped where the CPU has no
 * AVX-512 (the scalar references are then what runs, and the nn tests cover them). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

#define NEED_AVX512()                                                                        \
    do {                                                                                     \
        if (!cpu_has_avx512()) cr_skip_test("CPU without AVX-512: the scalar paths run instead"); \
    } while (0)

/* |got - want| in units of the float spacing at want (want from double). */
static double ulps(float got, double want) {
    double sp = nextafterf((float)fabs(want), INFINITY) - (float)fabs(want);
    return fabs((double)got - want) / sp;
}

static float *rnd_buf(int64_t n, uint32_t seed) {
    float *p = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    rng_t r = rng_make(seed, 0);
    for (int64_t i = 0; i < n; i++) p[i] = rng_normal(&r);
    return p;
}

static float gelu_ref(float x) { return 0.5f * x * (1.0f + erf_pw(x * 0.70710678118654752f)); }
static float gelu_d_ref(float x) {
    return 0.5f * (1.0f + erf_pw(x * 0.70710678118654752f)) + x * 0.39894228040143268f * exp_vec(-0.5f * x * x);
}

Test(kernels_simd, erf_accuracy_dense_sweep) {
    /* every 64th float in [0, 4.5] plus a log sweep of tiny values, both signs */
    int64_t n = 0, cap = 20000000;
    float *x = xmalloc(sizeof(float) * cap), *y = xmalloc(sizeof(float) * cap);
    for (float v = 1e-30f; v < 1e-2f; v *= 1.001f) x[n++] = v;
    for (float v = 1e-2f; v <= 4.5f && n < cap - 16; ) {
        x[n++] = v;
        uint32_t b;
        memcpy(&b, &v, 4);
        b += 64;
        memcpy(&v, &b, 4);
    }
    int64_t npos = n;
    for (int64_t i = 0; i < npos && n < cap; i++) x[n++] = -x[i];
    x[n++] = 0.0f;
    x[n++] = 10.0f;
    x[n++] = -INFINITY;
    double worst_ref = 0, worst_simd = 0;
    float at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = ulps(erf_pw(x[i]), erf((double)x[i]));
        if (e > worst_ref) { worst_ref = e; at = x[i]; }
    }
    cr_log_info("erf_pw: max %.2f ulp (at %g) over %lld inputs", worst_ref, at, (long long)n);
    cr_expect_leq(worst_ref, 3.0, "erf_pw max error %.2f ulp at %g", worst_ref, at);
    cr_expect_eq(erf_pw(0.0f), 0.0f);
    cr_expect_eq(erf_pw(INFINITY), 1.0f);
    cr_expect(isnan(erf_pw(NAN)));
    if (cpu_has_avx512()) {
        erf_avx512(n, x, y);
        for (int64_t i = 0; i < n; i++) worst_simd = fmax(worst_simd, ulps(y[i], erf((double)x[i])));
        cr_log_info("erf_avx512: max %.2f ulp", worst_simd);
        cr_expect_leq(worst_simd, 3.0, "erf_avx512 max error %.2f ulp", worst_simd);
        float sp[3] = {NAN, INFINITY, -0.0f}, so[3];
        erf_avx512(3, sp, so);
        cr_expect(isnan(so[0]));
        cr_expect_eq(so[1], 1.0f);
        cr_expect(so[2] == 0.0f && signbit(so[2]));
    }
    free(x);
    free(y);
}

Test(kernels_simd, gelu_forward_backward_match_scalar_reference) {
    NEED_AVX512();
    const int64_t lens[] = {1, 7, 15, 16, 17, 33, 1000, 100003};
    rng_t r = rng_make(3, 0);
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
        for (int off = 0; off < 3; off += 2) { /* unaligned start */
            int64_t n = lens[li];
            float *x = xmalloc(sizeof(float) * (n + 4)), *y = xmalloc(sizeof(float) * (n + 4));
            float *gy = xmalloc(sizeof(float) * (n + 4)), *gx = xmalloc(sizeof(float) * (n + 4));
            for (int64_t i = 0; i < n + 4; i++) {
                x[i] = 4.0f * rng_normal(&r);
                gy[i] = rng_normal(&r);
                gx[i] = rng_normal(&r);
                y[i] = 12345.0f;
            }
            if (n > 20) { x[off + 3] = 0.0f; x[off + 5] = -30.0f; x[off + 7] = 30.0f; x[off + 9] = 1e-20f; }
            float *g0 = xmalloc(sizeof(float) * (n + 4));
            memcpy(g0, gx, sizeof(float) * (n + 4));
            gelu_forward_avx512(n, x + off, y + off);
            gelu_backward_avx512(n, x + off, gy + off, gx + off);
            for (int64_t i = 0; i < n; i++) {
                float v = x[off + i], want = gelu_ref(v);
                /* erf's last-bit differences (FMA vs separate roundings) are absolute, ~6e-8:
                 * relative to 1 + erf they grow where it cancels (x < 0), hence the |x| term */
                cr_assert(fabsf(y[off + i] - want) <= 2e-7f * (fabsf(want) + fabsf(v)) + 1e-37f,
                          "gelu(%g): simd %.9g ref %.9g (n %lld)", v, y[off + i], want, (long long)n);
                float gw = g0[off + i] + gy[off + i] * gelu_d_ref(v);
                cr_assert(fabsf(gx[off + i] - gw) <= 1e-6f * fabsf(gw) + 3e-7f * (1.0f + fabsf(v)) * fabsf(gy[off + i]) + 1e-30f,
                          "gelu'(%g): simd %.9g ref %.9g", v, gx[off + i], gw);
            }
            /* nothing outside [off, off + n) is written */
            for (int64_t i = 0; i < off; i++) cr_assert_eq(y[i], 12345.0f);
            for (int64_t i = off + n; i < n + 4; i++) {
                cr_assert_eq(y[i], 12345.0f);
                cr_assert_eq(gx[i], g0[i]);
            }
            free(x), free(y), free(gy), free(gx), free(g0);
        }
}

Test(kernels_simd, gelu_against_double) {
    /* float GELU vs erf in double: for x >= 0 a few ulp; for x < 0, 1 + erf(x / sqrt 2) cancels
     * (as in any float implementation of the exact form), so the error there is absolute:
     * about |x| * ulp(1) / 2 */
    double worst_pos = 0, worst_neg = 0;
    for (int i = -100000; i <= 100000; i++) {
        float v = i * 1e-4f;
        double want = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
        double err = fabs(gelu_ref(v) - want);
        if (v > 0) worst_pos = fmax(worst_pos, err / want);
        else worst_neg = fmax(worst_neg, err / (1e-7 * (1.0 + fabs(v))));
    }
    cr_log_info("gelu: max relative error %.3g for x > 0; max |err| / (1e-7 (1 + |x|)) %.3g for x <= 0", worst_pos, worst_neg);
    cr_expect_lt(worst_pos, 5e-7, "gelu relative error %g for x > 0", worst_pos);
    cr_expect_lt(worst_neg, 1.0, "gelu absolute error too large for x <= 0 (%g)", worst_neg);
}

static void softmax_double(const float *s, int n, double *p, double *lse) {
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) m = fmax(m, s[j]);
    for (int j = 0; j < n; j++) sum += exp((double)s[j] - m);
    for (int j = 0; j < n; j++) p[j] = exp((double)s[j] - m) / sum;
    *lse = m + log(sum);
}

Test(kernels_simd, softmax_row_matches_double) {
    NEED_AVX512();
    const int lens[] = {1, 5, 16, 17, 64, 197, 1031};
    rng_t r = rng_make(5, 0);
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        int n = lens[li];
        float *s = xmalloc(sizeof(float) * (n + 1));
        double *p = xmalloc(sizeof(double) * n), lse;
        for (int masked = 0; masked < 2; masked++) {
            for (int j = 0; j < n; j++) s[j] = 8.0f * rng_normal(&r);
            if (masked && n > 2) s[0] = s[n - 1] = -INFINITY;
            s[n] = 777.0f;
            softmax_double(s, n, p, &lse);
            float l = softmax_row_avx512(s, n);
            cr_expect(fabs(l - lse) <= 1e-6 * fabs(lse) + 1e-6, "lse %g vs %g (n %d)", l, lse, n);
            for (int j = 0; j < n; j++)
                cr_assert(fabs(s[j] - p[j]) <= 2e-6 * p[j] + 1e-12, "p[%d] %g vs %g (n %d)", j, s[j], p[j], n);
            cr_assert_eq(s[n], 777.0f);
        }
        for (int j = 0; j < n; j++) s[j] = -INFINITY; /* fully masked row */
        cr_expect(isinf(softmax_row_avx512(s, n)));
        for (int j = 0; j < n; j++) cr_assert_eq(s[j], 0.0f);
        free(s), free(p);
    }
}

Test(kernels_simd, gelu_kernels_same_for_1_and_2_threads) {
    int64_t n = 300001;
    float *x = xmalloc(sizeof(float) * n), *y1 = xmalloc(sizeof(float) * n), *y2 = xmalloc(sizeof(float) * n);
    float *g1 = xcalloc(n, sizeof(float)), *g2 = xcalloc(n, sizeof(float));
    rng_t r = rng_make(9, 0);
    for (int64_t i = 0; i < n; i++) x[i] = 3.0f * rng_normal(&r);
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    cpu_unary(UN_GELU, n, x, y1, 0, 0);
    cpu_unary_backward(UN_GELU, n, x, y1, x, g1, 0, 0, 1);
    omp_set_num_threads(2);
    cpu_unary(UN_GELU, n, x, y2, 0, 0);
    cpu_unary_backward(UN_GELU, n, x, y2, x, g2, 0, 0, 1);
    omp_set_num_threads(nt);
    cr_expect_eq(memcmp(y1, y2, sizeof(float) * n), 0);
    cr_expect_eq(memcmp(g1, g2, sizeof(float) * n), 0);
    free(x), free(y1), free(y2), free(g1), free(g2);
}

/* The per-head attention products against naive double loops: odd M/N/K (row and column tails),
 * padded row strides, a transposed A, overwrite and accumulate. */
Test(kernels_simd, attention_head_products_match_naive) {
    NEED_AVX512();
    const int dims[][3] = {{1, 1, 16}, {9, 53, 64}, {8, 48, 32}, {17, 97, 48}, {197, 197, 64}, {6, 5, 16}};
    for (size_t t = 0; t < sizeof dims / sizeof *dims; t++)
        for (int acc = 0; acc < 2; acc++) {
            int M = dims[t][0], N = dims[t][1], D = dims[t][2];
            int64_t lda = D + 3, ldb = D + 5, ldc = N + 2, ldt = (N + 15) / 16 * 16;
            float *A = rnd_buf(M * lda, 41), *B = rnd_buf(N * ldb, 42), *C = rnd_buf(M * ldc, 43);
            float *C0 = xmalloc(sizeof(float) * M * ldc), *Bt = xcalloc(D * ldt, sizeof(float));
            memcpy(C0, C, sizeof(float) * M * ldc);
            for (int j = 0; j < N; j++)
                for (int d = 0; d < D; d++) Bt[d * ldt + j] = B[j * ldb + d];
            attn_gemm_abt_avx512(M, N, D, 0.7f, A, lda, Bt, ldt, C, ldc, acc);
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double s = 0, sa = 0; /* tolerance: float rounding of a D-term sum, ~ eps sum |a b| */
                    for (int d = 0; d < D; d++) {
                        s += (double)A[i * lda + d] * B[j * ldb + d];
                        sa += fabs((double)A[i * lda + d] * B[j * ldb + d]);
                    }
                    double want = 0.7 * s + (acc ? C0[i * ldc + j] : 0.0);
                    cr_assert(fabs(C[i * ldc + j] - want) <= 2e-6 * (0.7 * sa + fabs(want)) + 1e-30, "abt %dx%dx%d acc %d (%d,%d): %g vs %g",
                              M, N, D, acc, i, j, C[i * ldc + j], want);
                }
                for (int64_t j = N; j < ldc; j++) cr_assert_eq(C[i * ldc + j], C0[i * ldc + j]); /* padding untouched */
            }
            /* C2 [M x D] = alpha op(P) B2, P [M x N] (or its transpose [N x M]), B2 [N x D] rows of stride ldb */
            for (int trans = 0; trans < 2; trans++) {
                int64_t ldp = trans ? M + 1 : N + 1, ldo = D + 4;
                float *P = rnd_buf((trans ? N : M) * ldp, 44), *O = rnd_buf(M * ldo, 45);
                float *O0 = xmalloc(sizeof(float) * M * ldo);
                memcpy(O0, O, sizeof(float) * M * ldo);
                attn_gemm_ab_avx512(M, D, N, 1.3f, P, trans ? 1 : ldp, trans ? ldp : 1, B, ldb, O, ldo, acc);
                for (int i = 0; i < M; i++) {
                    for (int d = 0; d < D; d++) {
                        double s = 0, sa = 0;
                        for (int j = 0; j < N; j++) {
                            double t = (double)(trans ? P[j * ldp + i] : P[i * ldp + j]) * B[j * ldb + d];
                            s += t;
                            sa += fabs(t);
                        }
                        double want = 1.3 * s + (acc ? O0[i * ldo + d] : 0.0);
                        cr_assert(fabs(O[i * ldo + d] - want) <= 2e-6 * (1.3 * sa + fabs(want)) + 1e-30, "ab trans %d %dx%dx%d acc %d: %g vs %g",
                                  trans, M, D, N, acc, O[i * ldo + d], want);
                    }
                    for (int64_t d = D; d < ldo; d++) cr_assert_eq(O[i * ldo + d], O0[i * ldo + d]);
                }
                free(P), free(O), free(O0);
            }
            free(A), free(B), free(C), free(C0), free(Bt);
        }
}

/* The AVX2 GELU kernels (CPUs without AVX-512) against the same references. */
Test(kernels_simd, avx2_erf_and_gelu_match_reference) {
    if (!cpu_has_avx2_fma()) cr_skip_test("CPU without AVX2/FMA");
    int64_t n = 0, cap = 3000000;
    float *x = xmalloc(sizeof(float) * cap), *y = xmalloc(sizeof(float) * cap);
    for (float v = 1e-30f; v < 1e-2f; v *= 1.001f) x[n++] = v;
    for (float v = 1e-2f; v <= 4.5f && n < cap / 2 - 8;) {
        x[n++] = v;
        uint32_t b;
        memcpy(&b, &v, 4);
        b += 256;
        memcpy(&v, &b, 4);
    }
    int64_t npos = n;
    for (int64_t i = 0; i < npos; i++) x[n++] = -x[i];
    x[n++] = 0.0f;
    x[n++] = INFINITY;
    x[n++] = -INFINITY;
    x[n++] = NAN;
    erf_avx2(n, x, y);
    double worst = 0;
    for (int64_t i = 0; i < n - 4; i++) worst = fmax(worst, ulps(y[i], erf((double)x[i])));
    cr_log_info("erf_avx2: max %.2f ulp over %lld inputs", worst, (long long)n);
    cr_expect_leq(worst, 3.0, "erf_avx2 max error %.2f ulp", worst);
    cr_expect_eq(y[n - 4], 0.0f);
    cr_expect_eq(y[n - 3], 1.0f);
    cr_expect_eq(y[n - 2], -1.0f);
    cr_expect(isnan(y[n - 1]));
    /* GELU forward/backward on odd lengths, unaligned */
    const int64_t lens[] = {1, 7, 8, 9, 1001};
    rng_t r = rng_make(13, 0);
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        int64_t m = lens[li];
        float *xv = xmalloc(sizeof(float) * (m + 1)), *yv = xmalloc(sizeof(float) * (m + 1));
        float *gy = xmalloc(sizeof(float) * (m + 1)), *gx = xmalloc(sizeof(float) * (m + 1)), *g0 = xmalloc(sizeof(float) * (m + 1));
        for (int64_t i = 0; i <= m; i++) {
            xv[i] = 4.0f * rng_normal(&r);
            gy[i] = rng_normal(&r);
            gx[i] = g0[i] = rng_normal(&r);
            yv[i] = 999.0f;
        }
        gelu_forward_avx2(m, xv + 1 - 1, yv);
        gelu_backward_avx2(m, xv, gy, gx);
        for (int64_t i = 0; i < m; i++) {
            float v = xv[i], want = gelu_ref(v), gw = g0[i] + gy[i] * gelu_d_ref(v);
            cr_assert(fabsf(yv[i] - want) <= 2e-7f * (fabsf(want) + fabsf(v)) + 1e-37f, "avx2 gelu(%g) %g vs %g", v, yv[i], want);
            cr_assert(fabsf(gx[i] - gw) <= 1e-6f * fabsf(gw) + 3e-7f * (1.0f + fabsf(v)) * fabsf(gy[i]) + 1e-30f,
                      "avx2 gelu'(%g) %g vs %g", v, gx[i], gw);
        }
        cr_assert_eq(yv[m], 999.0f);
        cr_assert_eq(gx[m], g0[m]);
        free(xv), free(yv), free(gy), free(gx), free(g0);
    }
    free(x), free(y);
}
