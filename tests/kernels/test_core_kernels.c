/* test_core_kernels.c — the restructured CPU kernels against naive references written here:
 * single-pass layernorm backward (row blocks + partial sums) and copy_strided (per-thread carry
 * counters) on odd sizes, strided/permuted views, with and without the optional outputs, and the
 * same bits for 1 and 2 threads. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static float *rnd(int64_t n, uint32_t seed) {
    float *p = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    rng_t r = rng_make(seed, 0);
    for (int64_t i = 0; i < n; i++) p[i] = rng_normal(&r);
    return p;
}

static float *dup(const float *p, int64_t n) {
    float *q = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    memcpy(q, p, sizeof(float) * (size_t)n);
    return q;
}

/* layernorm backward in double, straight from the formula */
static void ln_bwd_naive(int64_t R, int64_t C, const float *x, const float *w, const float *mean,
                         const float *rstd, const float *gy, double *gx, double *gw, double *gb) {
    for (int64_t c = 0; c < C; c++) gw[c] = gb[c] = 0;
    for (int64_t r = 0; r < R; r++) {
        double s1 = 0, s2 = 0;
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)x[r * C + c] - mean[r]) * rstd[r], g = (double)gy[r * C + c] * (w ? w[c] : 1.0);
            s1 += g;
            s2 += g * xh;
            gw[c] += gy[r * C + c] * xh;
            gb[c] += gy[r * C + c];
        }
        for (int64_t c = 0; c < C; c++) {
            double xh = ((double)x[r * C + c] - mean[r]) * rstd[r], g = (double)gy[r * C + c] * (w ? w[c] : 1.0);
            gx[r * C + c] = rstd[r] * (g - s1 / C - xh * s2 / C);
        }
    }
}

Test(kernels_core, layernorm_backward_matches_naive_and_threads) {
    const int64_t shapes[][2] = {{1, 1}, {3, 5}, {31, 17}, {32, 64}, {33, 384}, {100, 7}, {517, 130}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int affine = 0; affine < 2; affine++) {
            int64_t R = shapes[s][0], C = shapes[s][1];
            float *x = rnd(R * C, 1), *gy = rnd(R * C, 2), *w = affine ? rnd(C, 3) : NULL, *b = rnd(C, 4);
            float *y = rnd(R * C, 5), *mean = rnd(R, 6), *rstd = rnd(R, 7);
            cpu_layernorm(R, C, ER_F32, x, w, affine ? b : NULL, 1e-5f, ER_F32, y, mean, rstd);
            float *gx0 = rnd(R * C, 8), *gw0 = rnd(C, 9), *gb0 = rnd(C, 10); /* accumulate onto these */
            float *gx1 = dup(gx0, R * C), *gw1 = dup(gw0, C), *gb1 = dup(gb0, C);
            float *gx2 = dup(gx0, R * C), *gw2 = dup(gw0, C), *gb2 = dup(gb0, C);
            double *ngx = xmalloc(sizeof(double) * R * C), *ngw = xmalloc(sizeof(double) * C),
                   *ngb = xmalloc(sizeof(double) * C);
            ln_bwd_naive(R, C, x, w, mean, rstd, gy, ngx, ngw, ngb);
            float *work = xmalloc_aligned(sizeof(float) * (cpu_layernorm_backward_workspace(R, C) + 1));
            int nt = omp_get_max_threads();
            omp_set_num_threads(1);
            cpu_layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, gx1, affine ? gw1 : NULL, gb1, work);
            omp_set_num_threads(2);
            cpu_layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, gx2, affine ? gw2 : NULL, gb2, work);
            omp_set_num_threads(nt);
            cr_assert_eq(memcmp(gx1, gx2, sizeof(float) * R * C), 0, "gx differs between 1 and 2 threads");
            cr_assert_eq(memcmp(gw1, gw2, sizeof(float) * C), 0);
            cr_assert_eq(memcmp(gb1, gb2, sizeof(float) * C), 0);
            for (int64_t i = 0; i < R * C; i++) {
                double want = gx0[i] + ngx[i];
                cr_assert(fabs(gx1[i] - want) <= 1e-4 * (1 + fabs(want)), "gx[%lld] %g vs %g (R %lld C %lld)",
                          (long long)i, gx1[i], want, (long long)R, (long long)C);
            }
            for (int64_t c = 0; c < C; c++) {
                if (affine)
                    cr_assert(fabs(gw1[c] - (gw0[c] + ngw[c])) <= 1e-4 * (1 + fabs(ngw[c])) + 1e-5 * sqrt((double)R),
                              "gw[%lld] %g vs %g", (long long)c, gw1[c], gw0[c] + ngw[c]);
                else
                    cr_assert_eq(gw1[c], gw0[c]); /* untouched when not requested */
                cr_assert(fabs(gb1[c] - (gb0[c] + ngb[c])) <= 1e-4 * (1 + fabs(ngb[c])) + 1e-5 * sqrt((double)R));
            }
            /* gx only, and weight/bias gradients only */
            float *gx3 = dup(gx0, R * C), *gb3 = dup(gb0, C);
            cpu_layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, gx3, NULL, NULL, work);
            cr_assert_eq(memcmp(gx3, gx1, sizeof(float) * R * C), 0);
            cpu_layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, NULL, NULL, gb3, work);
            cr_assert_eq(memcmp(gb3, gb1, sizeof(float) * C), 0);
            free(x), free(gy), free(w), free(b), free(y), free(mean), free(rstd);
            free(gx0), free(gw0), free(gb0), free(gx1), free(gw1), free(gb1), free(gx2), free(gw2), free(gb2);
            free(gx3), free(gb3), free(ngx), free(ngw), free(ngb), free(work);
        }
}

/* y[yoff(i)] (+)= x[xoff(i)] over the whole shape, one element at a time */
static void copy_naive(int nd, const int64_t *sh, const float *x, const int64_t *xs, float *y,
                       const int64_t *ys, int acc) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sh[d];
    for (int64_t e = 0; e < n; e++) {
        int64_t r = e, xo = 0, yo = 0;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t c = r % sh[d];
            r /= sh[d];
            xo += c * xs[d];
            yo += c * ys[d];
        }
        y[yo] = acc ? y[yo] + x[xo] : x[xo];
    }
}

Test(kernels_core, copy_strided_matches_naive_for_permutes_and_threads) {
    /* shapes and permutations: head split/merge, odd sizes, a long row (> one 8192 chunk),
     * broadcast-free transposes with a unit-stride inner dim and without */
    const struct { int nd; int64_t sh[5]; int perm[5]; } cases[] = {
        {5, {3, 2, 5, 7, 16}, {2, 0, 3, 1, 4}},
        {4, {2, 7, 3, 5}, {0, 2, 1, 3}},
        {3, {5, 3, 17}, {2, 1, 0}},
        {2, {3, 20000}, {0, 1}},
        {2, {40000, 1}, {1, 0}},
        {3, {1, 1, 9}, {0, 1, 2}},
        {4, {3, 1, 5, 2}, {3, 2, 1, 0}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int acc = 0; acc < 2; acc++) {
            int nd = cases[k].nd;
            int64_t n = 1, base[5], vsh[5], vs[5], ps[5];
            for (int d = nd - 1; d >= 0; d--) {
                base[d] = n;
                n *= cases[k].sh[d];
            }
            for (int d = 0; d < nd; d++) { /* x viewed through the permutation */
                vsh[d] = cases[k].sh[cases[k].perm[d]];
                vs[d] = base[cases[k].perm[d]];
            }
            for (int d = nd - 1, a = 1; d >= 0; d--) { /* packed destination in the view's shape */
                ps[d] = a;
                a *= (int)vsh[d];
            }
            float *x = rnd(n, 11), *y0 = rnd(n, 12);
            float *y1 = dup(y0, n), *y2 = dup(y0, n), *yr = dup(y0, n);
            copy_naive(nd, vsh, x, vs, yr, ps, acc);
            int nt = omp_get_max_threads();
            omp_set_num_threads(1);
            cpu_copy_strided(nd, vsh, x, vs, y1, ps, acc);
            omp_set_num_threads(2);
            cpu_copy_strided(nd, vsh, x, vs, y2, ps, acc);
            omp_set_num_threads(nt);
            cr_assert_eq(memcmp(y1, yr, sizeof(float) * n), 0, "case %zu acc %d (1 thread)", k, acc);
            cr_assert_eq(memcmp(y2, yr, sizeof(float) * n), 0, "case %zu acc %d (2 threads)", k, acc);
            /* and back: packed source into the permuted (strided) destination */
            float *z1 = dup(y0, n), *zr = dup(y0, n);
            copy_naive(nd, vsh, y1, ps, zr, vs, acc);
            cpu_copy_strided(nd, vsh, y1, ps, z1, vs, acc);
            cr_assert_eq(memcmp(z1, zr, sizeof(float) * n), 0, "case %zu acc %d (scatter)", k, acc);
            free(x), free(y0), free(y1), free(y2), free(yr), free(z1), free(zr);
        }
}

Test(kernels_core, sum_to_bias_gradient_matches_naive_and_threads) {
    /* y keeps a suffix of x's dims (the bias-gradient case): fixed row blocks + partial sums */
    const struct { int nd; int64_t xs[3], ys[3]; } cases[] = {
        {2, {517, 130}, {1, 130}}, {2, {64, 3}, {1, 3}}, {2, {65, 1}, {1, 1}},
        {3, {3, 200, 7}, {1, 1, 7}}, {3, {4, 33, 1536}, {1, 33, 1536}}, {2, {1, 9}, {1, 9}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int acc = 0; acc < 2; acc++) {
            int nd = cases[k].nd;
            int64_t n = 1, m = 1;
            for (int d = 0; d < nd; d++) {
                n *= cases[k].xs[d];
                m *= cases[k].ys[d];
            }
            float *x = rnd(n, 31), *y0 = rnd(m, 32), *y1 = dup(y0, m), *y2 = dup(y0, m);
            float *work = xmalloc_aligned(sizeof(float) * (cpu_sum_to_workspace(nd, cases[k].xs, cases[k].ys) + 1));
            int nt = omp_get_max_threads();
            omp_set_num_threads(1);
            cpu_sum_to(nd, cases[k].xs, x, cases[k].ys, y1, acc, work);
            omp_set_num_threads(2);
            cpu_sum_to(nd, cases[k].xs, x, cases[k].ys, y2, acc, work);
            omp_set_num_threads(nt);
            cr_assert_eq(memcmp(y1, y2, sizeof(float) * m), 0, "case %zu: 1 vs 2 threads", k);
            for (int64_t c = 0; c < m; c++) {
                double s = acc ? y0[c] : 0.0;
                for (int64_t r = 0; r < n / m; r++) s += x[r * m + c];
                cr_assert(fabs(y1[c] - s) <= 1e-5 * (1 + sqrt((double)(n / m))), "case %zu acc %d col %lld: %g vs %g",
                          k, acc, (long long)c, y1[c], s);
            }
            free(x), free(y0), free(y1), free(y2), free(work);
        }
}

/* exp_vec and erf_pw (cpu_kernels.h), the scalar forms the elementwise kernels vectorise. */
Test(kernels_core, vectorised_exp_and_erf_accuracy) {
    double worst_exp = 0, worst_erf = 0;
    for (int i = -200000; i <= 200000; i++) {
        float x = 0.75f + i * 4.35e-4f; /* [-86.25, 87.75]: normal-float results */
        double e = exp((double)x);
        worst_exp = fmax(worst_exp, fabs(exp_vec(x) - e) / e);
        float z = i * 3e-5f; /* [-6, 6] */
        worst_erf = fmax(worst_erf, fabs(erf_pw(z) - erf((double)z)));
    }
    cr_expect_lt(worst_exp, 5e-7, "exp relative error %g", worst_exp);
    cr_expect_lt(worst_erf, 1e-6, "erf absolute error %g", worst_erf);
    cr_expect_eq(exp_vec(-INFINITY), 0.0f);
    cr_expect_eq(exp_vec(-100.0f), 0.0f);
    cr_expect(isinf(exp_vec(1000.0f)));
    cr_expect(isfinite(exp_vec(88.5f)) && exp_vec(88.5f) > 2e38f);
}
