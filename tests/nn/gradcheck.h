/* gradcheck.h — finite-difference gradient checker for the Criterion op tests.
 *
 * For an op graph f(inputs) -> out, the checker draws a fixed random weight R (uniform [-1, 1])
 * of out's shape and differentiates the scalar L = sum(out * R):
 *   analytic:  backward_with(out, R) gives dL/dx for every input;
 *   numerical: central differences (L(x + eps) - L(x - eps)) / (2 eps) per input element, where
 *              the op runs in fp32 under no_grad but L is accumulated in double.
 * An element passes when |num - ana| <= atol + rtol * max(|num|, |ana|). Defaults: eps = 1e-2
 * (fp32 forward: a smaller step drowns in rounding, ~1e-7 * |L| / eps), atol = 1e-3, rtol = 5e-3.
 * Inputs with many elements are checked on a random subset of `max_elems` positions.
 * Inputs are long-lived CPU tensors that require grad (gc_rand). */
#ifndef ENDORET_GRADCHECK_H
#define ENDORET_GRADCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "nn/base/rng.h"
#include "nn/tensor.h"

typedef tensor *(*gc_fn)(tensor **in, void *ctx);

typedef struct {
    double eps, atol, rtol;
    int max_elems; /* per input; 0 = all */
} gc_opts;

static inline gc_opts gc_default(void) { return (gc_opts){1e-2, 1e-3, 5e-3, 0}; }

/* A long-lived [shape] tensor, uniform in [lo, hi), requiring grad. */
static inline tensor *gc_rand(int ndim, const int64_t *shape, uint64_t seed, float lo, float hi) {
    tensor *t = tensor_new(ndim, shape);
    rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 77, 0));
    for (int64_t i = 0; i < tensor_numel(t); i++) t->data[i] = lo + (hi - lo) * rng_uniform(&r);
    tensor_set_requires_grad(t, 1);
    return t;
}

static inline double gc_loss(gc_fn f, tensor **in, void *ctx, const float *R, int64_t n) {
    double L = 0;
    NO_GRAD {
        tensor *out = f(in, ctx);
        float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
        tensor_to_host(out, h);
        for (int64_t i = 0; i < n; i++) L += (double)h[i] * R[i];
        free(h);
    }
    arena_default_reset_all();
    return L;
}

/* Returns the number of failing elements (0 = pass); prints the first few failures and the worst
 * error to stderr, prefixed with `name`. */
static inline int gradcheck(const char *name, gc_fn f, void *ctx, int nin, tensor **in, gc_opts o) {
    /* analytic */
    for (int i = 0; i < nin; i++)
        if (in[i]->grad) tensor_fill(in[i]->grad, 0.0f);
    tensor *out = f(in, ctx);
    if (!out) {
        fprintf(stderr, "%s: forward failed: %s\n", name, er_msg());
        return 1;
    }
    int64_t n = tensor_numel(out);
    float *R = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(99, rng_stream(RNG_SAMPLING, 78, 0));
    for (int64_t i = 0; i < n; i++) R[i] = 2.0f * rng_uniform(&r) - 1.0f;
    tensor *Rt = tensor_from_host(out->ndim, out->shape, R);
    if (out->flags & T_REQUIRES_GRAD) backward_with(out, Rt);
    nn_step_end();
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < nin; i++) {
        tensor *x = in[i];
        int64_t m = tensor_numel(x);
        int64_t cnt = o.max_elems && o.max_elems < m ? o.max_elems : m;
        rng_t pick = rng_make(7, rng_stream(RNG_SAMPLING, 79, (uint32_t)i));
        for (int64_t c = 0; c < cnt; c++) {
            int64_t e = cnt == m ? c : (int64_t)rng_below(&pick, (uint32_t)m);
            float save = x->data[e];
            x->data[e] = save + (float)o.eps;
            double lp = gc_loss(f, in, ctx, R, n);
            x->data[e] = save - (float)o.eps;
            double lm = gc_loss(f, in, ctx, R, n);
            x->data[e] = save;
            /* the actual step taken in fp32 */
            double h = ((double)(save + (float)o.eps) - (double)(save - (float)o.eps));
            double num = (lp - lm) / h;
            double ana = x->grad ? x->grad->data[e] : 0.0;
            double err = fabs(num - ana), tol = o.atol + o.rtol * fmax(fabs(num), fabs(ana));
            if (err / tol > worst) worst = err / tol;
            if (err > tol) {
                if (bad < 5)
                    fprintf(stderr, "%s: input %d element %lld: numerical %.6g analytic %.6g\n", name,
                            i, (long long)e, num, ana);
                bad++;
            }
        }
    }
    if (bad || getenv("GC_VERBOSE")) fprintf(stderr, "%s: %d elements fail (worst err/tol %.3g)\n", name, bad, worst);
    free(R);
    return bad;
}

static inline void gc_free(int n, tensor **in) {
    for (int i = 0; i < n; i++) tensor_free(in[i]);
}

/* max |a - b| over n floats */
static inline double gc_maxdiff(const float *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* max |t - b| over t's elements in packed order (t may be a strided view) */
static inline double gc_maxdiff_t(const tensor *t, const double *b) {
    int64_t n = tensor_numel(t);
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    tensor_to_host(t, h);
    double m = gc_maxdiff(h, b, n);
    free(h);
    return m;
}

#endif
