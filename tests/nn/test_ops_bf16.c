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
#include "nn/optim.h"
#include "kernels/backend.h"
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

/* ---- the linear layer on bf16 activations (nn/ops_linear_bf16.c) ----
 * Exact against the fp32 layer in bf16 compute (which rounds its inputs to bf16): with x, W-rounded
 * and the incoming gradient bf16-representable, both paths multiply the same bf16 values with fp32
 * accumulation, so the bf16 layer's outputs are the fp32 layer's rounded once (y, dX) or equal
 * (dW, dbias, an fp32 y with a residual, dres). */
static tensor *bf16_exact(int ndim, const int64_t *shape, uint64_t seed, float lo, float hi) {
    tensor *t = gc_rand(ndim, shape, seed, lo, hi);
    for (int64_t i = 0; i < tensor_numel(t); i++) t->data[i] = er_bf16_to_f32(er_f32_to_bf16(t->data[i]));
    return t;
}

static void expect_bits_rounded(const tensor *got16, const float *ref, const char *what) {
    cr_assert_eq(got16->dtype, DT_BF16, "%s is not bf16", what);
    uint16_t *h = malloc((size_t)tensor_numel(got16) * 2);
    tensor_to_host_raw(got16, h);
    for (int64_t i = 0; i < tensor_numel(got16); i++)
        cr_assert_eq(h[i], er_f32_to_bf16(ref[i]), "%s[%lld]: 0x%04x, the fp32 path's %.9g rounds to 0x%04x", what,
                     (long long)i, h[i], ref[i], er_f32_to_bf16(ref[i]));
    free(h);
}

/* D = op(A) op(B) (+ C) (+ bias) through the CPU kernel with bf16 compute on fp32 operands: the
 * reference the bf16 layer must match bit for bit (bf16 compute rounds fp32 operands to bf16). */
static void ref_gemm(int tA, int tB, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                     const float *C, const float *bias, float *D) {
    gemm_ex_args g = {.transA = tA, .transB = tB, .m = m, .n = n, .k = k, .alpha = 1.0f, .beta = C ? 1.0f : 0.0f,
                      .A = A, .lda = lda, .B = B, .ldb = ldb, .C = C, .ldc = n, .D = D, .ldd = n, .bias = bias,
                      .compute = GEMM_COMPUTE_BF16};
    backend_get(DEV_CPU)->gemm_ex(&g);
}

static void linear_case(int with_res) {
    const int64_t B = 3, T = 5, K = 40, N = 24, M = B * T;
    tensor *x = bf16_exact(3, SHAPE(B, T, K), 41, -2, 2), *w = gc_rand(2, SHAPE(N, K), 42, -0.5f, 0.5f);
    tensor *bias = gc_rand(1, SHAPE(N), 43, -0.5f, 0.5f), *res = gc_rand(3, SHAPE(B, T, N), 44, -1, 1);
    tensor *r = bf16_exact(3, SHAPE(B, T, N), 45, -1, 1);
    /* the reference: the fp32 layer with bf16 compute, through the kernels. The loss is sum(y r), so
     * dL/dy = r (bf16-exact), dX = r W, dW = r^T x, dbias = the column sums of r, dres = r. */
    tensor *ps[4] = {x, w, bias, res};
    float *yref = xmalloc((size_t)M * N * 4), *gref[4];
    ref_gemm(0, 1, (int)M, (int)N, (int)K, x->data, (int)K, w->data, (int)K, with_res ? res->data : NULL, bias->data, yref);
    gref[0] = xmalloc((size_t)M * K * 4), gref[1] = xmalloc((size_t)N * K * 4), gref[2] = xcalloc((size_t)N, 4);
    gref[3] = xmalloc((size_t)M * N * 4);
    ref_gemm(0, 0, (int)M, (int)K, (int)N, r->data, (int)N, w->data, (int)K, NULL, NULL, gref[0]);
    ref_gemm(1, 0, (int)N, (int)K, (int)M, r->data, (int)N, x->data, (int)K, NULL, NULL, gref[1]);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) gref[2][j] += r->data[i * N + j];
    memcpy(gref[3], r->data, (size_t)M * N * 4);
    const int np = with_res ? 4 : 3; /* without a residual, res gets no gradient */
    /* the bf16 layer: x stored bf16 (and only x: W stays the fp32 master) */
    tensor *xb = op_cast(x, DT_BF16);
    tensor *yb = with_res ? op_linear_add(xb, w, bias, res) : op_linear(xb, w, bias);
    cr_assert_not_null(yb, "%s", er_msg());
    if (with_res) {
        cr_assert_eq(yb->dtype, DT_F32, "with an fp32 residual the output stays fp32");
        float *h = host(yb);
        cr_expect_eq(memcmp(h, yref, (size_t)tensor_numel(yb) * 4), 0, "linear_add output differs");
        free(h);
        cr_assert_eq(backward(op_sum_all(op_mul(yb, r))), ER_OK, "%s", er_msg());
    } else {
        expect_bits_rounded(yb, yref, "linear y");
        cr_assert_eq(backward(op_sum_all(op_mul(op_cast(yb, DT_F32), r))), ER_OK, "%s", er_msg());
    }
    /* dX: the bf16 layer rounded it once (xb's gradient) and the cast widened it into x's fp32 one */
    cr_expect_eq(x->grad->dtype, DT_F32, "x's gradient arrives through the cast");
    float *gx = host(x->grad);
    for (int64_t i = 0; i < tensor_numel(x); i++)
        cr_assert_eq(gx[i], er_bf16_to_f32(er_f32_to_bf16(gref[0][i])), "dL/dx[%lld]: %.9g, the fp32 layer's %.9g rounded is %.9g",
                     (long long)i, gx[i], gref[0][i], er_bf16_to_f32(er_f32_to_bf16(gref[0][i])));
    free(gx);
    for (int i = 1; i < np; i++) {
        float *g = host(ps[i]->grad);
        if (i == 2) /* the column sums: this loop's order, not sum_to's (fp32 roundings apart) */
            for (int64_t j = 0; j < N; j++)
                cr_expect(fabs(g[j] - gref[2][j]) <= 1e-5 * (1 + fabs(gref[2][j])), "dbias[%lld] %.9g vs %.9g",
                          (long long)j, g[j], gref[2][j]);
        else
            cr_expect_eq(memcmp(g, gref[i], (size_t)tensor_numel(ps[i]) * 4), 0, "%s's gradient differs from the fp32 layer's",
                         i == 1 ? "W" : "residual");
        free(g);
    }
    for (int i = 0; i < 4; i++) {
        free(gref[i]);
        tensor_free(ps[i]);
    }
    free(yref);
    tensor_free(r);
    nn_step_end();
}

Test(nn_ops_bf16, linear_on_bf16_is_the_fp32_layer_rounded) { linear_case(0); }
Test(nn_ops_bf16, linear_add_on_bf16_keeps_the_fp32_residual_stream) { linear_case(1); }

/* A pre-norm MLP on bf16 activations (layernorm to bf16, linear, bias+GELU, linear_add onto the fp32
 * residual) against the same MLP in fp32: outputs and every gradient within thr + 2^-8 |ref|, thr =
 * 8 roundings of 2^-9 of the tensor's largest magnitude (h, fc1's output, GELU's output and the
 * weight copies forward; dL/dg, dL/df, dL/dh backward), i.e. 2^-6 of the scale. Under make asan
 * the arena's poisoning (nn/arena.c) also makes this test fail on a gradient buffer released while
 * still in use, the bug an earlier version had (seen as 1e35 garbage in the emulated GPU run). */
static float *mlp(int bf16, tensor *x, tensor *w1, tensor *b1, tensor *w2, tensor *r, float *g[4]) {
    tensor *h = bf16 ? op_layernorm_to(x, NULL, NULL, 1e-6f, DT_BF16) : op_layernorm(x, NULL, NULL, 1e-6f);
    tensor *y = op_linear_add(op_bias_gelu(op_linear(h, w1, NULL), b1), w2, NULL, x);
    cr_assert_not_null(y, "%s", er_msg());
    float *yh = host(y);
    cr_assert_eq(backward(op_sum_all(op_mul(y, r))), ER_OK, "%s", er_msg());
    tensor *ps[4] = {x, w1, b1, w2};
    for (int i = 0; i < 4; i++) {
        g[i] = host(ps[i]->grad);
        tensor_fill(ps[i]->grad, 0.0f);
    }
    nn_step_end();
    return yh;
}

Test(nn_ops_bf16, mlp_on_bf16_activations_tracks_fp32) {
    const int64_t T = 9, C = 48, H = 96;
    tensor *x = gc_rand(2, SHAPE(T, C), 51, -2, 2), *w1 = gc_rand(2, SHAPE(H, C), 52, -0.3f, 0.3f);
    tensor *b1 = gc_rand(1, SHAPE(H), 53, -0.5f, 0.5f), *w2 = gc_rand(2, SHAPE(C, H), 54, -0.3f, 0.3f);
    tensor *r = gc_rand(2, SHAPE(T, C), 55, -1, 1);
    float *gref[4], *gbf[4];
    float *yref = mlp(0, x, w1, b1, w2, r, gref), *ybf = mlp(1, x, w1, b1, w2, r, gbf);
    expect_close(ybf, yref, T * C, max_abs(yref, T * C) / 64, "bf16 MLP y");
    const int64_t n[4] = {T * C, H * C, H, C * H};
    const char *what[4] = {"bf16 MLP dL/dx", "bf16 MLP dL/dW1", "bf16 MLP dL/db1", "bf16 MLP dL/dW2"};
    for (int i = 0; i < 4; i++) {
        expect_close(gbf[i], gref[i], n[i], max_abs(gref[i], n[i]) / 64, what[i]);
        free(gref[i]), free(gbf[i]);
    }
    free(yref), free(ybf);
    tensor_free(x), tensor_free(w1), tensor_free(b1), tensor_free(w2), tensor_free(r);
}

/* The bf16 layer reads the bf16 weight copy the optimizer's last step wrote (optim_config.
 * bf16_weights) while it is fresh: the same bits as the copy it would make (both W rounded to
 * nearest even); overwriting the copy shows it is the one read; a write to W through the API marks
 * it stale, and the layer rounds W itself again. */
Test(nn_ops_bf16, linear_reads_the_optimizers_bf16_weights) {
    const int64_t M = 6, K = 32, N = 16;
    tensor *w = tensor_param("w.weight", 2, SHAPE(N, K));
    tensor *xf = gc_rand(2, SHAPE(M, K), 61, -1, 1), *x = op_cast(xf, DT_BF16);
    float *wh = xmalloc((size_t)N * K * 4), y0[6 * 16], y1[6 * 16], y2[6 * 16], y3[6 * 16];
    for (int64_t i = 0; i < N * K; i++) wh[i] = sinf(0.3f * (float)i) * 0.4f;
    tensor_copy_from_host(w, wh);
    NO_GRAD { tensor_to_host(op_linear_to(x, w, NULL, DT_F32), y0); } /* W rounded by the layer */
    param_list pl = {0};
    params_add(&pl, w);
    optim_config oc = {.kind = OPTIM_SGD, .lr = 0.0, .bf16_weights = 1}; /* lr 0: W unchanged, copy written */
    optimizer *o = optim_new(&oc, &pl);
    cr_assert_not_null(o, "%s", er_msg());
    tensor_fill(w->grad, 1.0f);
    cr_assert_eq(optim_step(o), ER_OK);
    cr_assert(w->flags & T_BF16_FRESH);
    NO_GRAD { tensor_to_host(op_linear_to(x, w, NULL, DT_F32), y1); }
    cr_assert_eq(memcmp(y0, y1, sizeof y0), 0, "the optimizer's copy gives other bits than the layer's own");
    tensor_fill(w->bf16, 0.0f); /* the copy is what the layer reads: zeros in, zeros out */
    w->flags |= T_BF16_FRESH;
    NO_GRAD { tensor_to_host(op_linear_to(x, w, NULL, DT_F32), y2); }
    for (int i = 0; i < M * N; i++) cr_assert_eq(y2[i], 0.0f, "y[%d] = %g: the fresh copy was not read", i, y2[i]);
    tensor_copy_from_host(w, wh); /* a write: the copy is stale, the layer rounds W again */
    cr_assert_not(w->flags & T_BF16_FRESH);
    NO_GRAD { tensor_to_host(op_linear_to(x, w, NULL, DT_F32), y3); }
    cr_assert_eq(memcmp(y0, y3, sizeof y0), 0, "a stale copy was read");
    optim_free(o);
    free(pl.t);
    free(wh);
    tensor_free(w), tensor_free(xf);
    nn_step_end();
}
