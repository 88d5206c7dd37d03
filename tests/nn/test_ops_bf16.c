/* bf16 activations through the op layer (issue #27): layernorm with a bf16 output and bias+GELU on
 * bf16, forward and backward, against the same chain in fp32. Tolerance (llm.c's rule
 * |got - ref| <= thr + eps |ref|, eps = 2^-8, bf16's relative spacing): thr comes from the
 * roundings on the path, each at most 2^-9 of the largest magnitude it touches (see each check).
 * Also: gradient dtypes (bf16 activations get bf16 gradients, the fp32 residual input an fp32 one),
 * and the refusals (bf16 weights, rows past the bf16 limit). */
#include <math.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static const double EPS_BF16 = 1.0 / 256;

static float *host(const tensor *t) {
    float *h = xmalloc((size_t)tensor_numel(t) * sizeof(float));
    tensor_to_host(t, h); /* widened when bf16 */
    return h;
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* Largest |got - ref| - (thr + eps |ref|): <= 0 passes. Reports the worst element. */
static void expect_close(const float *got, const float *ref, int64_t n, double thr, const char *what) {
    double worst = -INFINITY, err = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]), excess = d - (thr + EPS_BF16 * fabs(ref[i]));
        if (excess > worst) worst = excess, at = i;
        err = fmax(err, d);
    }
    cr_log_info("%s: max |bf16 - fp32| %.3g (thr %.3g)", what, err, thr);
    cr_expect(worst <= 0, "%s[%lld]: bf16 %.6g vs fp32 %.6g, beyond %.3g + 2^-8 |ref|", what, (long long)at, got[at],
              ref[at], thr);
}

Test(nn_ops_bf16, layernorm_to_bf16_then_bias_gelu_track_fp32) {
    const int64_t B = 3, T = 7, C = 96, n = B * T * C;
    tensor *x = gc_rand(3, SHAPE(B, T, C), 1, -2, 2), *w = gc_rand(1, SHAPE(C), 2, 0.5f, 1.5f);
    tensor *b = gc_rand(1, SHAPE(C), 3, -0.5f, 0.5f), *bias = gc_rand(1, SHAPE(C), 4, -0.5f, 0.5f);
    tensor *r = gc_rand(3, SHAPE(B, T, C), 5, -1, 1); /* the loss's weights: L = sum(g * r) */
    tensor *ps[5] = {x, w, b, bias, r};
    float *ref[5], *got[5], *gref, *gbf;
    /* fp32 */
    tensor *g = op_bias_gelu(op_layernorm(x, w, b, 1e-6f), bias);
    gref = host(g);
    const double hmax = max_abs(gref, n) + 3; /* |h| <= |g| + a bias's 0.5 + GELU's dip, generously */
    cr_assert_eq(backward(op_sum_all(op_mul(g, r))), ER_OK, "%s", er_msg());
    for (int i = 0; i < 5; i++) {
        ref[i] = host(ps[i]->grad);
        tensor_fill(ps[i]->grad, 0.0f);
    }
    nn_step_end();
    /* bf16 activations: h = layernorm(x) stored bf16, g = bias_gelu(h) stored bf16 */
    tensor *h = op_layernorm_to(x, w, b, 1e-6f, DT_BF16);
    cr_assert_not_null(h, "%s", er_msg());
    cr_expect_eq(h->dtype, DT_BF16);
    g = op_bias_gelu(h, bias);
    cr_assert_not_null(g, "%s", er_msg());
    cr_expect_eq(g->dtype, DT_BF16, "bias_gelu keeps its input's dtype");
    gbf = host(g);
    cr_assert_eq(backward(op_sum_all(op_mul(op_cast(g, DT_F32), r))), ER_OK, "%s", er_msg());
    cr_expect_eq(h->grad->dtype, DT_BF16, "a bf16 activation gets a bf16 gradient");
    cr_expect_eq(x->grad->dtype, DT_F32, "the fp32 input gets an fp32 gradient");
    for (int i = 0; i < 5; i++) got[i] = host(ps[i]->grad);
    /* forward: h rounded (2^-9 |h|) moves g by at most max|gelu'| (1.13) times that, then g's own
     * rounding (the eps term) */
    expect_close(gbf, gref, n, 1.13 * hmax / 512, "bias_gelu(layernorm(x)) forward");
    /* gradients: dL/dg = r rounded to bf16 (2^-9), gelu'(z) with z off by h's rounding, dL/dh
     * rounded (2^-9): four roundings of at most 2^-9 each, relative to the largest gradient, for
     * dL/dh and everything summed from it (x's row terms, w's and b's column sums, bias's sums) */
    const char *names[5] = {"dL/dx", "dL/dw", "dL/db", "dL/dbias", "dL/dr"};
    const int64_t sizes[5] = {n, C, C, C, n};
    for (int i = 0; i < 4; i++) expect_close(got[i], ref[i], sizes[i], 4.0 / 512 * max_abs(ref[i], sizes[i]), names[i]);
    /* dL/dr = g: the forward's tolerance */
    expect_close(got[4], ref[4], n, 1.13 * hmax / 512, names[4]);
    for (int i = 0; i < 5; i++) {
        free(ref[i]), free(got[i]);
        tensor_free(ps[i]);
    }
    free(gref), free(gbf);
    nn_step_end();
}

/* A bf16 gradient flowing into an fp32 input through layernorm equals the fp32 backward given the
 * same (bf16-representable) incoming gradient, bit for bit: the kernels widen exactly. */
Test(nn_ops_bf16, layernorm_backward_from_bf16_gradient_is_exact) {
    const int64_t R = 5, C = 40;
    tensor *x = gc_rand(2, SHAPE(R, C), 11, -2, 2), *w = gc_rand(1, SHAPE(C), 12, 0.5f, 1.5f);
    tensor *r = gc_rand(2, SHAPE(R, C), 13, -1, 1);
    tensor *rb = op_cast(r, DT_BF16), *r16 = op_cast(rb, DT_F32); /* bf16-representable weights */
    float *gx_ref, *gw_ref;
    cr_assert_eq(backward(op_sum_all(op_mul(op_layernorm(x, w, NULL, 1e-5f), r16))), ER_OK);
    gx_ref = host(x->grad), gw_ref = host(w->grad);
    tensor_fill(x->grad, 0), tensor_fill(w->grad, 0);
    nn_step_end();
    /* d(sum(cast(y) * r16))/dy = r16 rounded to bf16 = r16 exactly */
    r16 = op_cast(op_cast(r, DT_BF16), DT_F32);
    cr_assert_eq(backward(op_sum_all(op_mul(op_cast(op_layernorm_to(x, w, NULL, 1e-5f, DT_BF16), DT_F32), r16))), ER_OK);
    float *gx = host(x->grad), *gw = host(w->grad);
    cr_expect_eq(memcmp(gx, gx_ref, R * C * 4), 0, "dL/dx differs from the fp32 backward");
    cr_expect_eq(memcmp(gw, gw_ref, C * 4), 0, "dL/dw differs from the fp32 backward");
    free(gx), free(gw), free(gx_ref), free(gw_ref);
    tensor_free(x), tensor_free(w), tensor_free(r);
    nn_step_end();
}

Test(nn_ops_bf16, refusals_name_the_op) {
    tensor *x = gc_rand(2, SHAPE(2, ER_LAYERNORM_BF16_MAX_COLS + 1), 21, -1, 1);
    cr_expect_null(op_layernorm_to(x, NULL, NULL, 1e-5f, DT_BF16));
    cr_expect(strstr(er_msg(), "layernorm") && strstr(er_msg(), "4096"), "%s", er_msg());
    cr_expect_null(op_layernorm_to(op_cast(x, DT_BF16), NULL, NULL, 1e-5f, DT_F32));
    cr_expect_not_null(op_layernorm(x, NULL, NULL, 1e-5f), "fp32 rows have no limit: %s", er_msg());
    cr_expect_null(op_layernorm_to(x, NULL, NULL, 1e-5f, 7));
    cr_expect(strstr(er_msg(), "dtype"), "%s", er_msg());
    tensor_free(x);
    nn_step_end();
}
