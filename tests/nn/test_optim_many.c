/* The CPU table's multi-tensor optimizer ops (adamw_many, sgd_many, fill_many): a list of tensors in
 * one call gives each tensor the bits of a call with it alone (a list of one, whose threads split
 * the work differently; the values themselves are checked against PyTorch in test_optim_kernels.c)
 * and fill_many those of fill: tensors of odd sizes (one element, a vector tail, several OpenMP
 * chunks, past the parallel threshold), each with its own lr and weight decay, over several steps;
 * and count 0 (or empty tensors) changing nothing. */
#include <omp.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

#define NT 10
static const int64_t SIZES[NT] = {1, 7, 1000, 4097, 16384, 16385, 33000, 0, 15, 70001};

typedef struct {
    float *p[NT], *m[NT], *v[NT], *g[NT];
} set;

static float *random_floats(int64_t n, float lo, float hi, uint32_t tag) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    rng_t r = rng_make(77, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(&r);
    return x;
}

static float *copy_of(const float *x, int64_t n) {
    float *c = malloc((size_t)(n ? n : 1) * sizeof *c);
    memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

/* a: fresh random state; b: the same bits */
static void sets_make(set *a, set *b) {
    for (int t = 0; t < NT; t++) {
        int64_t n = SIZES[t];
        a->p[t] = random_floats(n, -1, 1, 10 * t);
        a->g[t] = random_floats(n, -1, 1, 10 * t + 1);
        a->m[t] = random_floats(n, -0.1f, 0.1f, 10 * t + 2);
        a->v[t] = random_floats(n, 0, 0.01f, 10 * t + 3);
        b->p[t] = copy_of(a->p[t], n);
        b->g[t] = copy_of(a->g[t], n);
        b->m[t] = copy_of(a->m[t], n);
        b->v[t] = copy_of(a->v[t], n);
    }
}

static void sets_free(set *a, set *b) {
    for (int t = 0; t < NT; t++) {
        free(a->p[t]); free(a->g[t]); free(a->m[t]); free(a->v[t]);
        free(b->p[t]); free(b->g[t]); free(b->m[t]); free(b->v[t]);
    }
}

static void expect_same_bits(const char *what, int t, const float *x, const float *y, int64_t n) {
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&x[i], &y[i], sizeof x[i])) bad = i;
    if (bad >= 0)
        cr_expect_fail("%s tensor %d (n %lld) element %lld: many %.9g, one by one %.9g", what, t, (long long)n,
                       (long long)bad, (double)x[bad], (double)y[bad]);
}

static void expect_sets_equal(const char *what, const set *a, const set *b, int with_v) {
    for (int t = 0; t < NT; t++) {
        expect_same_bits(what, t, a->p[t], b->p[t], SIZES[t]);
        expect_same_bits(what, t, a->m[t], b->m[t], SIZES[t]);
        if (with_v) expect_same_bits(what, t, a->v[t], b->v[t], SIZES[t]);
    }
}

/* per-tensor lr (layer-wise decay) and weight decay (0 for "biases") */
static adamw_args adamw_of(int t, int64_t step) {
    adamw_args a = {.lr = 1e-3f * (1.0f + 0.37f * t), .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                    .weight_decay = t % 3 ? 0.05f : 0.0f, .gscale = t % 2 ? 1.0f : 0.7f};
    adamw_scalars(&a, step);
    return a;
}

static sgd_args sgd_of(int t, int first, float momentum, int nesterov) {
    return (sgd_args){.lr = 0.05f / (1.0f + t), .momentum = momentum, .weight_decay = t % 3 ? 1e-3f : 0.0f,
                      .gscale = t % 2 ? 1.0f : 0.5f, .nesterov = nesterov, .first = first};
}

Test(optim_many, adamw_many_equals_a_call_per_tensor_bitwise) {
    set a, b;
    sets_make(&a, &b);
    adamw_args args[NT];
    int64_t n[NT];
    memcpy(n, SIZES, sizeof n);
    for (int step = 1; step <= 4; step++) {
        for (int t = 0; t < NT; t++) args[t] = adamw_of(t, step);
        backend_cpu.adamw_many(NT, a.p, (const float *const *)a.g, a.m, a.v, n, args, NULL, NULL);
        for (int t = 0; t < NT; t++) /* each tensor alone: a list of one */
            backend_cpu.adamw_many(1, &b.p[t], (const float *const *)&b.g[t], &b.m[t], &b.v[t], &n[t], &args[t], NULL, NULL);
    }
    expect_sets_equal("adamw_many", &a, &b, 1);
    sets_free(&a, &b);
}

static void sgd_case(float momentum, int nesterov, int null_buf) {
    set a, b;
    sets_make(&a, &b);
    sgd_args args[NT];
    int64_t n[NT];
    memcpy(n, SIZES, sizeof n);
    float *bufa[NT], *bufb[NT];
    for (int t = 0; t < NT; t++) {
        bufa[t] = null_buf ? NULL : a.m[t];
        bufb[t] = null_buf ? NULL : b.m[t];
    }
    for (int step = 0; step < 3; step++) {
        for (int t = 0; t < NT; t++) args[t] = sgd_of(t, step == 0, momentum, nesterov);
        backend_cpu.sgd_many(NT, a.p, (const float *const *)a.g, bufa, n, args, NULL, NULL);
        for (int t = 0; t < NT; t++)
            backend_cpu.sgd_many(1, &b.p[t], (const float *const *)&b.g[t], &bufb[t], &n[t], &args[t], NULL, NULL);
    }
    expect_sets_equal(nesterov ? "sgd_many nesterov" : momentum ? "sgd_many momentum" : "sgd_many plain", &a, &b, 0);
    sets_free(&a, &b);
}

Test(optim_many, sgd_many_equals_a_call_per_tensor_bitwise) {
    sgd_case(0.9f, 0, 0);
    sgd_case(0.9f, 1, 0);
    sgd_case(0.0f, 0, 1); /* no momentum: no buffers */
}

Test(optim_many, fill_many_fills_every_element_and_nothing_else) {
    float *y[NT];
    int64_t n[NT];
    memcpy(n, SIZES, sizeof n);
    for (int t = 0; t < NT; t++) {
        y[t] = random_floats(n[t] + 1, -1, 1, 500 + t);
        y[t][n[t]] = 42.0f; /* one past the end stays */
    }
    backend_cpu.fill_many(NT, y, n, 0.0f);
    for (int t = 0; t < NT; t++) {
        float *want = malloc((size_t)(n[t] + 1) * sizeof *want);
        backend_cpu.fill(want, n[t], 0.0f);
        want[n[t]] = 42.0f;
        expect_same_bits("fill_many", t, y[t], want, n[t] + 1);
        free(want);
        free(y[t]);
    }
}

/* count 0 (with NULL arrays) and tensors of 0 elements change nothing */
Test(optim_many, count_zero_is_a_no_op) {
    backend_cpu.adamw_many(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    backend_cpu.sgd_many(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    backend_cpu.fill_many(0, NULL, NULL, 1.0f);
    float x = 3.0f, *p = &x, *m = &x, *v = &x;
    const float *g = &x;
    int64_t n0 = 0;
    adamw_args aa = adamw_of(1, 1);
    sgd_args sa = sgd_of(1, 1, 0.9f, 0);
    backend_cpu.adamw_many(1, &p, &g, &m, &v, &n0, &aa, NULL, NULL);
    backend_cpu.sgd_many(1, &p, &g, &m, &n0, &sa, NULL, NULL);
    backend_cpu.fill_many(1, &p, &n0, 1.0f);
    cr_expect_eq(x, 3.0f);
}

/* The work split depends on the thread count, the bits do not. */
Test(optim_many, same_bits_with_one_and_three_threads) {
    set a, b;
    sets_make(&a, &b);
    int64_t n[NT];
    memcpy(n, SIZES, sizeof n);
    adamw_args args[NT];
    for (int t = 0; t < NT; t++) args[t] = adamw_of(t, 1);
    omp_set_num_threads(1);
    backend_cpu.adamw_many(NT, a.p, (const float *const *)a.g, a.m, a.v, n, args, NULL, NULL);
    omp_set_num_threads(3); /* an uneven split of the chunks */
    backend_cpu.adamw_many(NT, b.p, (const float *const *)b.g, b.m, b.v, n, args, NULL, NULL);
    expect_sets_equal("adamw_many 1 vs 3 threads", &a, &b, 1);
    sets_free(&a, &b);
}
