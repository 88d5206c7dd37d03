/* Initialisers: statistics of the random ones (bounds, mean, std against scipy's truncnorm
 * moments), determinism and thread-independence, and MAE's sin-cos position embedding against
 * a numpy re-implementation of MAE's util/pos_embed.py (tests/ref/make_optim_refs.py). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/init.h"
#include "tests/ref/optim_refs.h"
#include "tests/test_util.h"

static void moments(const float *x, int n, double *mean, double *std) {
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *std = sqrt(s2 / n);
}

Test(optim_init, normal_icdf_inverts_cdf) {
    const double ps[] = {1e-12, 1e-6, 0.001, 0.02, 0.1, 0.3, 0.5, 0.7, 0.97, 0.999999};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        double x = normal_icdf(ps[i]);
        double back = 0.5 * erfc(-x / sqrt(2.0));
        cr_expect(fabs(back - ps[i]) <= 1e-13 * ps[i] + 1e-16, "p %g -> x %.17g -> %.17g", ps[i], x, back);
    }
    cr_expect_float_eq(normal_icdf(0.975), 1.959963984540054, 1e-12);
}

Test(optim_init, trunc_normal_bounds_and_moments) {
    const int n = 200000;
    float *x = malloc(n * sizeof *x);
    rng_t r = rng_make(7, rng_stream(RNG_INIT, 1, 0));
    const float std = 0.02f;
    init_trunc_normal_std(x, n, 0.0f, std, 2.0f, &r);
    for (int i = 0; i < n; i++) cr_assert(fabsf(x[i]) <= 2 * std, "x[%d] = %g outside +-2 std", i, x[i]);
    double mean, sd;
    moments(x, n, &mean, &sd);
    /* standard error of the mean ~ 0.88*std/sqrt(n) = 4e-5 std; allow 5 s.e. */
    cr_expect_lt(fabs(mean), 5 * REF_TRUNCNORM2_STD * std / sqrt(n), "mean %g", mean);
    cr_expect_lt(fabs(sd / std - REF_TRUNCNORM2_STD), 0.01, "std/std0 %g want %g", sd / std, REF_TRUNCNORM2_STD);
    /* timm default bounds are absolute [-2, 2]: with std 0.02 the draws are a plain normal */
    init_trunc_normal(x, n, 0.0f, std, -2.0f, 2.0f, &r);
    moments(x, n, &mean, &sd);
    cr_expect_lt(fabs(sd / std - 1.0), 0.01, "untruncated std/std0 %g", sd / std);
    /* a one-sided, shifted truncation: N(1, 1) on [1.5, 4] stays inside */
    init_trunc_normal(x, 1000, 1.0f, 1.0f, 1.5f, 4.0f, &r);
    for (int i = 0; i < 1000; i++) cr_assert(x[i] >= 1.5f && x[i] <= 4.0f, "x[%d] = %g", i, x[i]);
    free(x);
}

Test(optim_init, xavier_uniform_bounds_and_variance) {
    const int fan_in = 384, fan_out = 1152, n = fan_in * fan_out;
    float *x = malloc(n * sizeof *x);
    rng_t r = rng_make(3, rng_stream(RNG_INIT, 2, 0));
    init_xavier_uniform(x, n, fan_in, fan_out, 1.0f, &r);
    double bound = sqrt(6.0 / (fan_in + fan_out)), mean, sd;
    for (int i = 0; i < n; i++) cr_assert(fabs(x[i]) <= bound, "x[%d] = %g bound %g", i, x[i], bound);
    moments(x, n, &mean, &sd);
    cr_expect_lt(fabs(mean), 5 * bound / sqrt(3.0 * n));
    cr_expect_lt(fabs(sd - bound / sqrt(3.0)) / (bound / sqrt(3.0)), 0.005, "std %g", sd);
    free(x);
}

Test(optim_init, deterministic_and_thread_independent) {
    const int n = 300001; /* above the parallel threshold */
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    omp_set_num_threads(1);
    rng_t r1 = rng_make(99, rng_stream(RNG_INIT, 5, 0));
    init_trunc_normal_std(a, n, 0.0f, 0.02f, 2.0f, &r1);
    omp_set_num_threads(2);
    rng_t r2 = rng_make(99, rng_stream(RNG_INIT, 5, 0));
    init_trunc_normal_std(b, n, 0.0f, 0.02f, 2.0f, &r2);
    cr_expect(memcmp(a, b, n * sizeof *a) == 0, "1 thread vs 2 threads differ");
    cr_expect_eq(r1.index, r2.index);
    cr_expect_eq(r1.index, 2 * (uint64_t)n);
    /* a second call continues the stream: it must not repeat the first draw */
    init_trunc_normal_std(b, n, 0.0f, 0.02f, 2.0f, &r2);
    cr_expect(memcmp(a, b, 64) != 0);
    /* another stream gives other values */
    rng_t r3 = rng_make(99, rng_stream(RNG_INIT, 6, 0));
    init_trunc_normal_std(b, 16, 0.0f, 0.02f, 2.0f, &r3);
    cr_expect(memcmp(a, b, 16 * sizeof *a) != 0);
    free(a); free(b);
}

Test(optim_init, constants) {
    float x[5];
    init_ones(x, 5);
    for (int i = 0; i < 5; i++) cr_expect_eq(x[i], 1.0f);
    init_zeros(x, 5);
    for (int i = 0; i < 5; i++) cr_expect_eq(x[i], 0.0f);
    init_constant(x, 5, -0.5f);
    for (int i = 0; i < 5; i++) cr_expect_eq(x[i], -0.5f);
}

static void expect_sincos(const float *want, int dim, int grid, int cls) {
    int rows = cls + grid * grid;
    float *got = malloc(sizeof(float) * rows * dim);
    cr_assert_eq(init_sincos_pos_embed_2d(got, dim, grid, grid, cls), ER_OK);
    for (int i = 0; i < rows * dim; i++)
        cr_expect(fabsf(got[i] - want[i]) <= 1e-7f, "dim %d grid %d: row %d col %d got %.9g want %.9g", dim, grid,
                  i / dim, i % dim, got[i], want[i]);
    free(got);
}

Test(optim_init, sincos_pos_embed_matches_mae) {
    expect_sincos(REF_SINCOS_D16_G4_CLS, 16, 4, 1);
    expect_sincos(REF_SINCOS_D32_G3, 32, 3, 0);
    float tmp[64];
    cr_expect_eq(init_sincos_pos_embed_2d(tmp, 6, 2, 2, 0), ER_INPUT); /* dim not a multiple of 4 */
    cr_expect(strstr(er_msg(), "multiple of 4") != NULL, "%s", er_msg());
}
