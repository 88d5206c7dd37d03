/* Elementwise ops: forward against double references, backward against finite differences. */
#include <math.h>
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct { int op; } bin_ctx;

static tensor *f_binary(tensor **in, void *c) {
    switch (((bin_ctx *)c)->op) {
    case BIN_ADD: return op_add(in[0], in[1]);
    case BIN_SUB: return op_sub(in[0], in[1]);
    case BIN_MUL: return op_mul(in[0], in[1]);
    default: return op_div(in[0], in[1]);
    }
}

/* pairs of broadcast-compatible shapes, odd sizes included */
static const struct { int na, nb; int64_t a[4], b[4]; } bshapes[] = {
    {2, 2, {3, 17}, {3, 17}},
    {2, 1, {17, 3}, {3}},
    {3, 3, {2, 1, 5}, {1, 3, 5}},
    {1, 2, {5}, {4, 1}},
    {3, 1, {2, 3, 197}, {1}},
    {2, 2, {1, 1}, {3, 1}},
};

Test(nn_elementwise, binary_forward_broadcast) {
    for (int op = 0; op < BIN_COUNT; op++)
        for (size_t s = 0; s < sizeof bshapes / sizeof *bshapes; s++) {
            tensor *a = gc_rand(bshapes[s].na, bshapes[s].a, 1 + s, -2, 2);
            tensor *b = gc_rand(bshapes[s].nb, bshapes[s].b, 2 + s, 0.5f, 2);
            bin_ctx c = {op};
            tensor *in[2] = {a, b};
            tensor *y = f_binary(in, &c);
            cr_assert_not_null(y, "%s", er_msg());
            /* reference with explicit index arithmetic over the broadcast shape */
            int nd = y->ndim;
            int64_t n = tensor_numel(y);
            for (int64_t e = 0; e < n; e++) {
                int64_t r = e, ia = 0, ib = 0, sa = 1, sb = 1;
                for (int d = nd - 1; d >= 0; d--) {
                    int64_t cidx = r % y->shape[d];
                    r /= y->shape[d];
                    int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
                    if (da >= 0) { if (a->shape[da] > 1) ia += cidx * sa; sa *= a->shape[da]; }
                    if (db >= 0) { if (b->shape[db] > 1) ib += cidx * sb; sb *= b->shape[db]; }
                }
                double va = a->data[ia], vb = b->data[ib];
                double ref = op == BIN_ADD ? va + vb : op == BIN_SUB ? va - vb : op == BIN_MUL ? va * vb : va / vb;
                cr_assert_float_eq(y->data[e], ref, 1e-5 * (1 + fabs(ref)), "op %d shape %zu e %lld", op, s, (long long)e);
            }
            cr_assert_eq(gradcheck("binary", f_binary, &c, 2, in, gc_default()), 0, "op %d shapes %zu", op, s);
            gc_free(2, in);
            nn_step_end();
        }
}

typedef struct { int which; float a, b; } un_ctx;

static tensor *f_unary(tensor **in, void *cv) {
    un_ctx *c = cv;
    tensor *x = in[0];
    switch (c->which) {
    case 0: return op_exp(x);
    case 1: return op_log(x);
    case 2: return op_sqrt(x);
    case 3: return op_pow(x, c->a);
    case 4: return op_abs(x);
    case 5: return op_clamp(x, c->a, c->b);
    case 6: return op_gelu(x);
    case 7: return op_relu(x);
    case 8: return op_sigmoid(x);
    case 9: return op_tanh(x);
    case 10: return op_add_scalar(x, c->a);
    case 11: return op_mul_scalar(x, c->a);
    case 12: return op_affine(x, c->a, c->b);
    default: return op_neg(x);
    }
}

static double ref_unary(const un_ctx *c, double x) {
    switch (c->which) {
    case 0: return exp(x);
    case 1: return log(x);
    case 2: return sqrt(x);
    case 3: return pow(x, c->a);
    case 4: return fabs(x);
    case 5: return x < c->a ? c->a : x > c->b ? c->b : x;
    case 6: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case 7: return x > 0 ? x : 0;
    case 8: return 1 / (1 + exp(-x));
    case 9: return tanh(x);
    case 10: return x + c->a;
    case 11: return x * c->a;
    case 12: return c->a * x + c->b;
    default: return -x;
    }
}

Test(nn_elementwise, unary_forward_and_grad) {
    const int64_t shapes[3][3] = {{1, 1, 1}, {3, 17, 1}, {2, 197, 1}};
    for (int w = 0; w < 14; w++)
        for (int s = 0; s < 3; s++) {
            un_ctx c = {w, 1.7f, 0.0f};
            float lo = -2, hi = 2;
            if (w == 1 || w == 2 || w == 3) lo = 0.3f; /* log, sqrt, pow need x > 0 */
            if (w == 5) { c.a = -0.5f; c.b = 0.7f; }
            if (w == 12) c.b = 0.25f;
            tensor *x = gc_rand(2, shapes[s], 10 + w, lo, hi);
            /* keep inputs away from kinks (abs/relu at 0, clamp at its bounds) by more than eps */
            for (int64_t i = 0; i < tensor_numel(x); i++) {
                float *v = &x->data[i];
                float kinks[2] = {w == 5 ? c.a : 0.0f, w == 5 ? c.b : 0.0f};
                if (w == 4 || w == 5 || w == 7)
                    for (int k = 0; k < 2; k++)
                        if (fabsf(*v - kinks[k]) < 0.05f) *v = kinks[k] + 0.05f;
            }
            tensor *in[1] = {x};
            tensor *y = f_unary(in, &c);
            cr_assert_not_null(y);
            for (int64_t i = 0; i < tensor_numel(x); i++) {
                double ref = ref_unary(&c, x->data[i]);
                cr_assert_float_eq(y->data[i], ref, 2e-6 * (1 + fabs(ref)), "unary %d x %g", w, x->data[i]);
            }
            cr_assert_eq(gradcheck("unary", f_unary, &c, 1, in, gc_default()), 0, "unary %d shape %d", w, s);
            gc_free(1, in);
            nn_step_end();
        }
}

Test(nn_elementwise, ops_accept_strided_views) {
    tensor *x = gc_rand(2, SHAPE(3, 5), 3, -1, 1);
    tensor *t = op_transpose(x, 0, 1); /* [5, 3], strided */
    tensor *y = op_exp(t);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) cr_assert_float_eq(y->data[i * 3 + j], expf(x->data[j * 5 + i]), 1e-6);
    tensor_free(x);
}

typedef struct { float p; int training; } drop_ctx;
static tensor *f_dropout(tensor **in, void *cv) {
    drop_ctx *c = cv;
    return op_dropout(in[0], c->p, 1234, rng_stream(RNG_DROPOUT, 5, 6), c->training);
}

Test(nn_elementwise, dropout_mask_is_philox_and_grad) {
    tensor *x = gc_rand(2, SHAPE(17, 197), 4, 0.5f, 1.5f);
    drop_ctx c = {0.25f, 1};
    tensor *in[1] = {x};
    tensor *y = f_dropout(in, &c);
    int64_t n = tensor_numel(x), kept = 0;
    uint64_t stream = rng_stream(RNG_DROPOUT, 5, 6);
    for (int64_t i = 0; i < n; i++) {
        int keep = rng_at(1234, stream, (uint64_t)i) >= (uint32_t)(0.25 * 4294967296.0);
        cr_assert_float_eq(y->data[i], keep ? x->data[i] / 0.75f : 0.0f, 1e-6, "element %lld", (long long)i);
        kept += keep;
    }
    cr_expect(kept > n * 0.7 && kept < n * 0.8, "kept %lld of %lld", (long long)kept, (long long)n);
    cr_assert_eq(gradcheck("dropout", f_dropout, &c, 1, in, gc_default()), 0);
    c.training = 0;
    cr_assert_eq(f_dropout(in, &c), x, "eval mode is the identity");
    tensor_free(x);
}

Test(nn_elementwise, shape_errors_return_null_and_propagate) {
    tensor *a = tensor_new(2, SHAPE(2, 3)), *b = tensor_new(2, SHAPE(4, 3));
    cr_assert_null(op_add(a, b));
    cr_assert(strstr(er_msg(), "do not broadcast"), "%s", er_msg());
    cr_assert_null(op_exp(op_add(a, b)));
    cr_assert_null(op_clamp(a, 1, 0));
    tensor_free(a);
    tensor_free(b);
}

static tensor *f_add_relu(tensor **in, void *c) {
    (void)c;
    return op_add_relu(in[0], in[1]);
}

/* relu(a + b) as one op: the bits of op_relu(op_add(a, b)) forward and backward (both gradients,
 * written fresh, accumulated into a leaf, a == b, b broadcast), and finite differences */
Test(nn_elementwise, add_relu_equals_add_then_relu) {
    const int64_t sa[2] = {7, 33}, sb[2][2] = {{7, 33}, {1, 33}};
    for (int mode = 0; mode < 4; mode++) { /* fresh, accumulate into the leaves, a == b, broadcast b */
        tensor *ys[2], *as[2], *bs[2];
        for (int fused = 0; fused < 2; fused++) {
            as[fused] = gc_rand(2, sa, 80, -1, 1);
            bs[fused] = gc_rand(2, sb[mode == 3], 81, -1, 1);
            if (mode == 1) { /* the leaves already hold a gradient: the op's backward adds to it */
                cr_assert_eq(backward(op_sum_all(op_mul(as[fused], as[fused]))), ER_OK, "%s", er_msg());
                cr_assert_eq(backward(op_sum_all(op_mul(bs[fused], bs[fused]))), ER_OK, "%s", er_msg());
            }
            /* intermediates (a network's tensors) get fresh gradients, leaves accumulate */
            tensor *a = mode == 1 ? as[fused] : op_mul_scalar(as[fused], 1.5f);
            tensor *b = mode == 2 ? a : mode == 1 ? bs[fused] : op_mul_scalar(bs[fused], 0.5f);
            ys[fused] = fused ? op_add_relu(a, b) : op_relu(op_add(a, b));
            cr_assert_not_null(ys[fused], "%s", er_msg());
            tensor *R = gc_rand(2, sa, 82, -1, 1);
            tensor_set_requires_grad(R, 0);
            cr_assert_eq(backward_with(ys[fused], R), ER_OK, "%s", er_msg());
            tensor_free(R);
        }
        int64_t n = tensor_numel(ys[0]), nb = tensor_numel(bs[0]);
        int zeros = 0;
        for (int64_t i = 0; i < n; i++) zeros += ys[1]->data[i] == 0.0f;
        cr_assert(zeros > n / 10 && zeros < n * 9 / 10, "mode %d: the ReLU was not exercised", mode);
        cr_assert(!memcmp(ys[0]->data, ys[1]->data, sizeof(float) * n), "mode %d: y", mode);
        cr_assert(!memcmp(as[0]->grad->data, as[1]->grad->data, sizeof(float) * n), "mode %d: ga", mode);
        if (mode != 2) cr_assert(!memcmp(bs[0]->grad->data, bs[1]->grad->data, sizeof(float) * nb), "mode %d: gb", mode);
        tensor *all[] = {as[0], bs[0], as[1], bs[1]};
        gc_free(4, all);
        nn_step_end();
    }
    /* finite differences (step 1e-2): a is moved off the kink, |a + b| >= 0.05 everywhere */
    for (int s = 0; s < 2; s++) {
        tensor *in[2] = {gc_rand(2, sa, 90 + s, -1, 1), gc_rand(2, sb[s], 92 + s, -1, 1)};
        for (int64_t i = 0; i < 7 * 33; i++) {
            float t = in[0]->data[i] + in[1]->data[s ? i % 33 : i];
            if (fabsf(t) < 0.05f) in[0]->data[i] += t < 0 ? -0.1f : 0.1f;
        }
        cr_assert_eq(gradcheck("add_relu", f_add_relu, NULL, 2, in, gc_default()), 0, "shape %d", s);
        gc_free(2, in);
        nn_step_end();
    }
}
