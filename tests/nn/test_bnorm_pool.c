/* batch norm (train / eval, running statistics), max pooling and average pooling against PyTorch
 * (tests/ref/bn_pool_refs.h, written by tests/ref/make_bn_ref.py), plus finite-difference
 * gradients, the fused BN + ReLU path and the shape errors. */
#include <math.h>
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/ref/bn_pool_refs.h"
#include "tests/test_util.h"

/* max |t - ref| <= tol * (1 + max |ref|) */
static void expect_near(const char *what, const float *got, const float *ref, int64_t n, double tol) {
    double scale = 0, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)got[i] - ref[i]) > worst) {
            worst = fabs((double)got[i] - ref[i]);
            at = i;
        }
    cr_assert(worst <= tol * (1 + scale), "%s: element %lld: got %.8g, torch %.8g", what,
              (long long)at, got[at], ref[at]);
}

static tensor *long_lived(int ndim, const int64_t *shape, const float *v, int grad) {
    tensor *t = tensor_from_host_new(ndim, shape, v);
    if (grad) tensor_set_requires_grad(t, 1);
    return t;
}

typedef struct {
    const float *rm0, *rv0, *x[2], *w, *b, *R;
    const float *y[2], *gx[2], *gw[2], *gb[2], *rm[2], *rv[2];
    const float *ey, *egx, *egw, *egb;
    int ndim;
    int64_t shape[4];
    float momentum;
} bn_ref;

#define BN_REF(T, nd, mom, ...)                                                                    \
    (bn_ref){REF_##T##_RM0, REF_##T##_RV0, {REF_##T##_X1, REF_##T##_X2}, REF_##T##_W, REF_##T##_B,  \
             REF_##T##_R, {REF_##T##_TRAIN1_Y, REF_##T##_TRAIN2_Y},                               \
             {REF_##T##_TRAIN1_GX, REF_##T##_TRAIN2_GX}, {REF_##T##_TRAIN1_GW, REF_##T##_TRAIN2_GW}, \
             {REF_##T##_TRAIN1_GB, REF_##T##_TRAIN2_GB}, {REF_##T##_TRAIN1_RM, REF_##T##_TRAIN2_RM}, \
             {REF_##T##_TRAIN1_RV, REF_##T##_TRAIN2_RV}, REF_##T##_EVAL_Y, REF_##T##_EVAL_GX,      \
             REF_##T##_EVAL_GW, REF_##T##_EVAL_GB, nd, {__VA_ARGS__}, mom}

/* Two training steps then eval, every output and gradient against torch. */
static void run_bn_ref(const bn_ref *r) {
    int64_t C = r->shape[1], n = 1;
    for (int i = 0; i < r->ndim; i++) n *= r->shape[i];
    tensor *w = long_lived(1, &C, r->w, 1), *b = long_lived(1, &C, r->b, 1);
    tensor *rm = long_lived(1, &C, r->rm0, 0), *rv = long_lived(1, &C, r->rv0, 0);
    float *h = malloc(sizeof(float) * n);
    for (int step = 0; step < 3; step++) {
        int train = step < 2;
        const float *xs = train ? r->x[step] : r->x[0];
        tensor *x = long_lived(r->ndim, r->shape, xs, 1);
        if (w->grad) tensor_fill(w->grad, 0.0f);
        if (b->grad) tensor_fill(b->grad, 0.0f);
        tensor *y = op_batchnorm2d(x, w, b, rm, rv, train, r->momentum, 1e-5f);
        cr_assert_not_null(y, "%s", er_msg());
        tensor_to_host(y, h);
        char what[64];
        snprintf(what, sizeof what, "%s step %d", train ? "train" : "eval", step + 1);
        expect_near(what, h, train ? r->y[step] : r->ey, n, 2e-6);
        cr_assert_eq(backward_with(y, tensor_from_host(r->ndim, r->shape, r->R)), ER_OK, "%s", er_msg());
        expect_near("gx", x->grad->data, train ? r->gx[step] : r->egx, n, 1e-5);
        expect_near("gw", w->grad->data, train ? r->gw[step] : r->egw, C, 1e-5);
        expect_near("gb", b->grad->data, train ? r->gb[step] : r->egb, C, 1e-5);
        /* running stats: updated by training steps, untouched by eval */
        expect_near("running_mean", rm->data, r->rm[train ? step : 1], C, 1e-6);
        expect_near("running_var", rv->data, r->rv[train ? step : 1], C, 1e-6);
        tensor_free(x);
        nn_step_end();
    }
    free(h);
    tensor *all[] = {w, b, rm, rv};
    gc_free(4, all);
}

Test(nn_bnorm, batchnorm2d_train_eval_and_running_stats_match_torch) {
    bn_ref r = BN_REF(BN4, 4, 0.1f, 2, 3, 4, 5);
    run_bn_ref(&r);
}

Test(nn_bnorm, batchnorm_on_rows_matches_torch_batchnorm1d) {
    bn_ref r = BN_REF(BN2, 2, 0.3f, 6, 5);
    run_bn_ref(&r);
}

typedef struct {
    int training, affine, relu;
    tensor *rm, *rv;
} bn_gc;

static tensor *f_bn(tensor **in, void *cv) {
    bn_gc *c = cv;
    tensor *w = c->affine ? in[1] : NULL, *b = c->affine ? in[2] : NULL;
    return c->relu ? op_batchnorm2d_relu(in[0], w, b, c->rm, c->rv, c->training, 0.1f, 1e-5f)
                   : op_batchnorm2d(in[0], w, b, c->rm, c->rv, c->training, 0.1f, 1e-5f);
}

Test(nn_bnorm, gradients_match_finite_differences) {
    const int64_t shapes[][4] = {{2, 3, 5, 3}, {3, 2, 1, 1}, {1, 4, 3, 7}};
    for (int s = 0; s < 3; s++)
        for (int mode = 0; mode < 3; mode++) { /* train affine, train without affine, eval affine */
            int64_t C = shapes[s][1];
            tensor *in[3] = {gc_rand(4, shapes[s], 30 + s, -2, 2), gc_rand(1, &C, 31 + s, 0.5f, 1.5f),
                             gc_rand(1, &C, 32 + s, -1, 1)};
            bn_gc c = {mode != 2, mode != 1, 0, gc_rand(1, &C, 33, -0.3f, 0.3f),
                       gc_rand(1, &C, 34, 0.5f, 1.5f)};
            tensor_set_requires_grad(c.rm, 0);
            tensor_set_requires_grad(c.rv, 0);
            gc_opts o = gc_default();
            o.max_elems = 60;
            cr_assert_eq(gradcheck("batchnorm2d", f_bn, &c, c.affine ? 3 : 1, in, o), 0, "shape %d mode %d", s, mode);
            tensor *more[] = {c.rm, c.rv};
            gc_free(2, more);
            gc_free(3, in);
            nn_step_end();
        }
}

/* Inference: the fused pass equals relu(bn(x)) bit for bit, and the eval output does not depend on
 * the batch (each image alone gives the same rows). */
Test(nn_bnorm, fused_relu_inference_and_batch_independence) {
    const int64_t C = 6;
    tensor *x = gc_rand(4, SHAPE(3, C, 5, 4), 40, -2, 2), *w = gc_rand(1, &C, 41, 0.5f, 1.5f);
    tensor *b = gc_rand(1, &C, 42, -1, 1), *rm = gc_rand(1, &C, 43, -0.5f, 0.5f), *rv = gc_rand(1, &C, 44, 0.2f, 2);
    tensor *all[] = {x, w, b, rm, rv};
    for (int i = 0; i < 5; i++) tensor_set_requires_grad(all[i], 0);
    tensor *fused = op_batchnorm2d_relu(x, w, b, rm, rv, 0, 0.1f, 1e-5f);
    tensor *two = op_relu(op_batchnorm2d(x, w, b, rm, rv, 0, 0.1f, 1e-5f));
    cr_assert_not_null(fused);
    int64_t n = tensor_numel(x);
    cr_assert(memcmp(fused->data, two->data, sizeof(float) * n) == 0, "fused BN + ReLU differs");
    int neg = 0;
    for (int64_t i = 0; i < n; i++) neg += fused->data[i] == 0.0f;
    cr_assert(neg > n / 10, "the ReLU was not exercised (%d zeros)", neg);
    tensor *one = op_batchnorm2d(op_slice(x, 0, 1, 2), w, b, rm, rv, 0, 0.1f, 1e-5f);
    tensor *all3 = op_batchnorm2d(x, w, b, rm, rv, 0, 0.1f, 1e-5f);
    cr_assert(memcmp(one->data, all3->data + n / 3, sizeof(float) * (n / 3)) == 0, "eval output depends on the batch");
    /* recorded (x needs a gradient): the same values, and the ReLU's gradient mask reaches x */
    tensor_set_requires_grad(x, 1);
    tensor *rec = op_batchnorm2d_relu(x, w, b, rm, rv, 0, 0.1f, 1e-5f);
    cr_assert(rec->flags & T_REQUIRES_GRAD, "nothing recorded");
    cr_assert(memcmp(fused->data, rec->data, sizeof(float) * n) == 0, "recorded BN + ReLU differs");
    cr_assert_eq(backward(op_sum_all(rec)), ER_OK, "%s", er_msg());
    for (int64_t i = 0; i < n; i++) {
        int64_t c = i / 20 % C;
        float want = fused->data[i] > 0 ? w->data[c] / sqrtf(rv->data[c] + 1e-5f) : 0.0f;
        cr_assert_float_eq(x->grad->data[i], want, 1e-5, "element %lld", (long long)i);
    }
    gc_free(5, all);
    nn_step_end();
}

/* Training: the fused op (one tensor; the BN backward masks gy by output > 0) equals BN then a
 * separate ReLU bit for bit, forward, x / w / b gradients and running statistics, in training and
 * eval, with and without the affine terms and with a gradient already in x (accumulation); and its
 * gradients match finite differences. */
Test(nn_bnorm, fused_relu_training_equals_bn_then_relu) {
    const int64_t C = 5, shape[4] = {3, C, 6, 5};
    const int64_t n = 3 * C * 30;
    for (int mode = 0; mode < 4; mode++) { /* train affine, train plain, eval affine, train affine + accumulate */
        int training = mode != 2, affine = mode != 1, acc = mode == 3;
        tensor *out[2], *xs[2], *ws[2], *bs[2], *rms[2], *rvs[2];
        for (int fused = 0; fused < 2; fused++) {
            xs[fused] = gc_rand(4, shape, 50, -2, 2), ws[fused] = gc_rand(1, &C, 51, 0.5f, 1.5f);
            bs[fused] = gc_rand(1, &C, 52, -1, 1), rms[fused] = gc_rand(1, &C, 53, -0.3f, 0.3f);
            rvs[fused] = gc_rand(1, &C, 54, 0.5f, 1.5f);
            tensor_set_requires_grad(rms[fused], 0), tensor_set_requires_grad(rvs[fused], 0);
            tensor *w = affine ? ws[fused] : NULL, *b = affine ? bs[fused] : NULL;
            if (acc) { /* x's gradient holds something before this op's backward adds to it */
                cr_assert_eq(backward(op_sum_all(op_mul(xs[fused], xs[fused]))), ER_OK, "%s", er_msg());
            }
            /* an intermediate input (as in a network) gets a fresh gradient that the backward writes;
             * the leaf of the accumulating mode already has one that it adds to */
            tensor *x = acc ? xs[fused] : op_mul_scalar(xs[fused], 2.0f);
            out[fused] = fused ? op_batchnorm2d_relu(x, w, b, rms[fused], rvs[fused], training, 0.1f, 1e-5f)
                               : op_relu(op_batchnorm2d(x, w, b, rms[fused], rvs[fused], training, 0.1f, 1e-5f));
            cr_assert_not_null(out[fused], "%s", er_msg());
            tensor *R = gc_rand(4, shape, 55, -1, 1);
            tensor_set_requires_grad(R, 0);
            cr_assert_eq(backward_with(out[fused], R), ER_OK, "%s", er_msg());
            tensor_free(R);
        }
        int zeros = 0;
        for (int64_t i = 0; i < n; i++) zeros += out[1]->data[i] == 0.0f;
        cr_assert(zeros > n / 10 && zeros < n * 9 / 10, "mode %d: the ReLU was not exercised (%d zeros of %lld)", mode, zeros, (long long)n);
        cr_assert(!memcmp(out[0]->data, out[1]->data, sizeof(float) * n), "mode %d: y", mode);
        cr_assert(!memcmp(xs[0]->grad->data, xs[1]->grad->data, sizeof(float) * n), "mode %d: gx", mode);
        if (affine) {
            cr_assert(!memcmp(ws[0]->grad->data, ws[1]->grad->data, sizeof(float) * C), "mode %d: gw", mode);
            cr_assert(!memcmp(bs[0]->grad->data, bs[1]->grad->data, sizeof(float) * C), "mode %d: gb", mode);
        }
        cr_assert(!memcmp(rms[0]->data, rms[1]->data, sizeof(float) * C) && !memcmp(rvs[0]->data, rvs[1]->data, sizeof(float) * C),
                  "mode %d: running statistics", mode);
        tensor *all[] = {xs[0], ws[0], bs[0], rms[0], rvs[0], xs[1], ws[1], bs[1], rms[1], rvs[1]};
        gc_free(10, all);
        nn_step_end();
    }
    /* finite differences through the fused op. In training every output of a channel moves with each
     * input, so a step can carry some output across the ReLU's kink and the difference quotient is
     * then wrong for both the fused op and BN + a separate ReLU (seeds 60, 70 and 80 do that to
     * both alike); this seed's draw has no output within a step of 0. */
    const int64_t s2[4] = {2, 3, 4, 3};
    const int64_t C2 = 3;
    for (int mode = 0; mode < 2; mode++) {
        tensor *in[3] = {gc_rand(4, s2, 90 + mode, -2, 2), gc_rand(1, &C2, 62, 0.5f, 1.5f), gc_rand(1, &C2, 63, -1, 1)};
        bn_gc c = {mode == 0, 1, 1, gc_rand(1, &C2, 64, -0.3f, 0.3f), gc_rand(1, &C2, 65, 0.5f, 1.5f)};
        tensor_set_requires_grad(c.rm, 0), tensor_set_requires_grad(c.rv, 0);
        gc_opts o = gc_default();
        o.max_elems = 72;
        cr_assert_eq(gradcheck("batchnorm2d_relu", f_bn, &c, 3, in, o), 0, "mode %d", mode);
        tensor *more[] = {c.rm, c.rv};
        gc_free(2, more), gc_free(3, in);
        nn_step_end();
    }
}

Test(nn_bnorm, bad_arguments_are_refused) {
    const int64_t C = 3;
    tensor *x = tensor_new(4, SHAPE(2, C, 2, 2)), *w4 = tensor_new(1, SHAPE(4)), *rm = tensor_new(1, &C);
    tensor *x1 = tensor_new(4, SHAPE(1, C, 1, 1));
    cr_assert_null(op_batchnorm2d(x, w4, NULL, NULL, NULL, 1, 0.1f, 1e-5f));
    cr_assert(strstr(er_msg(), "must be [3]"), "%s", er_msg());
    cr_assert_null(op_batchnorm2d(x, NULL, NULL, NULL, NULL, 0, 0.1f, 1e-5f));
    cr_assert(strstr(er_msg(), "eval mode needs running_mean"), "%s", er_msg());
    cr_assert_null(op_batchnorm2d(x, NULL, NULL, rm, NULL, 1, 0.1f, 1e-5f));
    cr_assert(strstr(er_msg(), "both or neither"), "%s", er_msg());
    cr_assert_null(op_batchnorm2d(x1, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f));
    cr_assert(strstr(er_msg(), "more than one value per channel"), "%s", er_msg());
    cr_assert_null(op_batchnorm2d(x, NULL, NULL, NULL, NULL, 1, 0.1f, 0.0f));
    cr_assert(strstr(er_msg(), "eps"), "%s", er_msg());
    tensor_set_requires_grad(rm, 1);
    cr_assert_null(op_batchnorm2d(x, NULL, NULL, rm, rm, 1, 0.1f, 1e-5f));
    cr_assert(strstr(er_msg(), "without gradients"), "%s", er_msg());
    tensor *all[] = {x, w4, rm, x1};
    gc_free(4, all);
    nn_step_end();
}

/* ---- pooling ---- */

Test(nn_pool, maxpool_stem_with_ties_matches_torch) {
    tensor *x = long_lived(4, SHAPE(2, 2, 7, 6), REF_MP_X, 1);
    tensor *y = op_maxpool2d(x, 3, 2, 1);
    cr_assert_not_null(y, "%s", er_msg());
    cr_assert(y->shape[2] == 4 && y->shape[3] == 3, "output %lldx%lld", (long long)y->shape[2], (long long)y->shape[3]);
    expect_near("maxpool y", y->data, REF_MP_Y, 48, 0);
    cr_assert_eq(backward_with(y, tensor_from_host(4, y->shape, REF_MP_R)), ER_OK, "%s", er_msg());
    expect_near("maxpool gx (ties to the first max)", x->grad->data, REF_MP_GX, 168, 1e-7);
    tensor_free(x);
    nn_step_end();
}

/* Direct loops in double, other geometries (stride 1, no padding, a window equal to the input),
 * gradients by finite differences on distinct values (0.1 apart, so eps never reorders a window). */
static tensor *f_mp(tensor **in, void *cv) {
    const int *k = cv;
    return op_maxpool2d(in[0], k[0], k[1], k[2]);
}

Test(nn_pool, maxpool_against_direct_loops_and_finite_differences) {
    const int geo[][3] = {{3, 2, 1}, {2, 0, 0}, {3, 1, 1}, {5, 5, 2}, {1, 1, 0}};
    const int64_t N = 2, C = 3, H = 9, W = 7, n = N * C * H * W;
    for (int g = 0; g < 5; g++) {
        tensor *x = tensor_new(4, SHAPE(N, C, H, W));
        rng_t r = rng_make(5 + g, rng_stream(RNG_SAMPLING, 6, 0));
        for (int64_t i = 0; i < n; i++) x->data[i] = (float)i * 0.1f - 20.0f;
        for (int64_t i = n - 1; i > 0; i--) { /* shuffle */
            int64_t j = rng_below(&r, (uint32_t)(i + 1));
            float t = x->data[i];
            x->data[i] = x->data[j];
            x->data[j] = t;
        }
        tensor_set_requires_grad(x, 1);
        int k = geo[g][0], s = geo[g][1] ? geo[g][1] : k, p = geo[g][2];
        tensor *y = f_mp(&x, (void *)geo[g]);
        cr_assert_not_null(y, "%s", er_msg());
        int64_t P = (H + 2 * p - k) / s + 1, Q = (W + 2 * p - k) / s + 1;
        cr_assert(y->shape[2] == P && y->shape[3] == Q);
        for (int64_t pl = 0; pl < N * C; pl++)
            for (int64_t i = 0; i < P; i++)
                for (int64_t j = 0; j < Q; j++) {
                    float m = -INFINITY;
                    for (int64_t a = i * s - p; a < i * s - p + k; a++)
                        for (int64_t b = j * s - p; b < j * s - p + k; b++)
                            if (a >= 0 && a < H && b >= 0 && b < W) m = fmaxf(m, x->data[(pl * H + a) * W + b]);
                    cr_assert_eq(y->data[(pl * P + i) * Q + j], m, "geometry %d", g);
                }
        nn_step_end();
        gc_opts o = gc_default();
        o.max_elems = 150;
        cr_assert_eq(gradcheck("maxpool2d", f_mp, (void *)geo[g], 1, &x, o), 0, "geometry %d", g);
        tensor_free(x);
        nn_step_end();
    }
}

Test(nn_pool, maxpool_propagates_nan_and_refuses_bad_settings) {
    tensor *x = tensor_new(4, SHAPE(1, 1, 3, 3));
    x->data[4] = NAN;
    tensor *y = op_maxpool2d(x, 2, 1, 0);
    for (int i = 0; i < 4; i++) cr_assert(isnan(y->data[i]), "window %d: %g", i, y->data[i]);
    cr_assert_null(op_maxpool2d(x, 3, 2, 2));
    cr_assert(strstr(er_msg(), "padding <= kernel / 2"), "%s", er_msg());
    cr_assert_null(op_maxpool2d(x, 5, 1, 0));
    cr_assert(strstr(er_msg(), "does not fit"), "%s", er_msg());
    tensor_free(x);
    nn_step_end();
}

Test(nn_pool, adaptive_avgpool_matches_torch) {
    tensor *x = long_lived(4, SHAPE(2, 3, 7, 5), REF_AP_X, 1);
    tensor *y = op_adaptive_avgpool2d(x, 3, 2);
    cr_assert_not_null(y, "%s", er_msg());
    expect_near("adaptive avgpool y", y->data, REF_AP_Y, 36, 1e-6);
    cr_assert_eq(backward_with(y, tensor_from_host(4, y->shape, REF_AP_R)), ER_OK, "%s", er_msg());
    expect_near("adaptive avgpool gx", x->grad->data, REF_AP_GX, 210, 1e-6);
    tensor_free(x);
    nn_step_end();
}

static tensor *f_gap(tensor **in, void *cv) { return cv ? op_adaptive_avgpool2d(in[0], 4, 3) : op_global_avgpool(in[0]); }

Test(nn_pool, global_avgpool_is_the_mean_and_gradients_check) {
    tensor *x = gc_rand(4, SHAPE(2, 3, 5, 7), 60, -2, 2);
    tensor *y = op_global_avgpool(x);
    cr_assert(y && y->ndim == 2 && y->shape[0] == 2 && y->shape[1] == 3, "global_avgpool shape");
    for (int pl = 0; pl < 6; pl++) {
        double s = 0;
        for (int i = 0; i < 35; i++) s += x->data[pl * 35 + i];
        cr_assert_float_eq(y->data[pl], s / 35, 1e-6, "plane %d", pl);
    }
    nn_step_end();
    gc_opts o = gc_default();
    cr_assert_eq(gradcheck("global_avgpool", f_gap, NULL, 1, &x, o), 0);
    cr_assert_eq(gradcheck("adaptive_avgpool 4x3", f_gap, (void *)1, 1, &x, o), 0);
    tensor_free(x);
    nn_step_end();
}
