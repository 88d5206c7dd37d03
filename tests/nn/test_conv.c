/* conv2d: forward against a direct-loop reference in double, gradients against finite differences,
 * over odd shapes (stride 2, padding, 1x1, 7x7, odd and non-square sizes, dilation, groups, no
 * bias) and every path of kernels/cpu/conv.c (small maps in image groups, one image in several
 * column tiles, 1x1 without a column buffer), and the shape errors. */
#include <math.h>
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct {
    int N, C, H, W, K, R, S;
    int sh, sw, ph, pw, dh, dw, groups, bias;
} cv_case;

static tensor *f_conv(tensor **in, void *cv) {
    const cv_case *c = cv;
    const int st[2] = {c->sh, c->sw}, pd[2] = {c->ph, c->pw}, dl[2] = {c->dh, c->dw};
    return op_conv2d_ex(in[0], in[1], c->bias ? in[2] : NULL, st, pd, dl, c->groups, GEMM_COMPUTE_FP32);
}

/* y[n,k,p,q] = b[k] + sum_{c in group, r, s} x[n,c,ih,iw] w[k,c',r,s], straight from the definition */
static double *conv_ref(const cv_case *c, const float *x, const float *w, const float *b, int *P, int *Q) {
    int p_ = (c->H + 2 * c->ph - c->dh * (c->R - 1) - 1) / c->sh + 1;
    int q_ = (c->W + 2 * c->pw - c->dw * (c->S - 1) - 1) / c->sw + 1;
    int Cg = c->C / c->groups, Kg = c->K / c->groups;
    double *y = malloc(sizeof(double) * c->N * c->K * p_ * q_);
    for (int n = 0; n < c->N; n++)
        for (int k = 0; k < c->K; k++)
            for (int p = 0; p < p_; p++)
                for (int q = 0; q < q_; q++) {
                    double s = c->bias ? b[k] : 0.0;
                    int g = k / Kg;
                    for (int ci = 0; ci < Cg; ci++)
                        for (int r = 0; r < c->R; r++)
                            for (int t = 0; t < c->S; t++) {
                                int ih = p * c->sh - c->ph + r * c->dh, iw = q * c->sw - c->pw + t * c->dw;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                s += (double)x[(((int64_t)n * c->C + g * Cg + ci) * c->H + ih) * c->W + iw] *
                                     w[(((int64_t)k * Cg + ci) * c->R + r) * c->S + t];
                            }
                    y[(((int64_t)n * c->K + k) * p_ + p) * q_ + q] = s;
                }
    *P = p_;
    *Q = q_;
    return y;
}

static void make_inputs(const cv_case *c, tensor **in, uint64_t seed) {
    in[0] = gc_rand(4, SHAPE(c->N, c->C, c->H, c->W), seed, -1, 1);
    in[1] = gc_rand(4, SHAPE(c->K, c->C / c->groups, c->R, c->S), seed + 1, -0.5f, 0.5f);
    in[2] = gc_rand(1, SHAPE(c->K), seed + 2, -1, 1);
}

static void check_forward(const cv_case *c, tensor **in, double tol) {
    tensor *y = f_conv(in, (void *)c);
    cr_assert_not_null(y, "%s", er_msg());
    int P, Q;
    double *ref = conv_ref(c, in[0]->data, in[1]->data, in[2]->data, &P, &Q);
    cr_assert(y->shape[0] == c->N && y->shape[1] == c->K && y->shape[2] == P && y->shape[3] == Q,
              "output shape [%lld, %lld, %lld, %lld], want [%d, %d, %d, %d]", (long long)y->shape[0],
              (long long)y->shape[1], (long long)y->shape[2], (long long)y->shape[3], c->N, c->K, P, Q);
    double d = gc_maxdiff_t(y, ref);
    cr_assert(d <= tol, "conv %dx%d stride %dx%d pad %dx%d dil %dx%d groups %d: max diff %.3g", c->R,
              c->S, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->groups, d);
    free(ref);
}

/* N C H W K R S sh sw ph pw dh dw groups bias */
static const cv_case CASES[] = {
    {2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* 3x3 same padding, odd sizes */
    {2, 3, 9, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0},   /* stride 2, no bias */
    {3, 4, 5, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1},   /* 1x1 (no column buffer), batch > threads */
    {2, 4, 7, 7, 6, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0},   /* 1x1 stride 2 (ResNet downsample) */
    {1, 3, 13, 11, 4, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0}, /* 7x7 stride 2 pad 3 (ResNet stem), one image */
    {2, 3, 8, 9, 4, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1},   /* dilation 2 */
    {2, 4, 6, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1},   /* two groups */
    {2, 4, 6, 5, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, 0},   /* depthwise, stride 2 */
    {2, 3, 7, 8, 5, 3, 2, 2, 1, 0, 1, 1, 2, 1, 1},   /* non-square kernel, stride, pad, dilation */
    {1, 2, 4, 4, 3, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1},   /* stride > 1 with padding leaving empty edges */
    {2, 4, 17, 16, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2, 1}, /* 1x1 on a map >= 256 positions: no column buffer */
    {5, 3, 10, 10, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* small maps in image groups of 3 + 2 */
};
#define NCASES (int)(sizeof CASES / sizeof *CASES)

Test(nn_conv, forward_matches_direct_loops) {
    for (int i = 0; i < NCASES; i++) {
        tensor *in[3];
        make_inputs(&CASES[i], in, 10 + 3 * i);
        check_forward(&CASES[i], in, 1e-5);
        gc_free(3, in);
        nn_step_end();
    }
}

/* An image whose column buffer spans several tiles (rows per tile < P), one image (images in turn)
 * and three (one per thread when there are threads), with a stride leaving a partial last tile. */
Test(nn_conv, forward_over_several_column_tiles) {
    const cv_case big[] = {{1, 16, 130, 129, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                           {3, 16, 131, 130, 4, 3, 3, 2, 1, 1, 1, 1, 1, 1, 0}};
    for (int i = 0; i < 2; i++) {
        tensor *in[3];
        make_inputs(&big[i], in, 50 + i);
        check_forward(&big[i], in, 2e-5);
        gc_free(3, in);
        nn_step_end();
    }
}

Test(nn_conv, gradients_match_finite_differences) {
    for (int i = 0; i < NCASES; i++) {
        const cv_case *c = &CASES[i];
        tensor *in[3];
        make_inputs(c, in, 100 + 3 * i);
        gc_opts o = gc_default();
        o.max_elems = 120;
        char name[64];
        snprintf(name, sizeof name, "conv2d case %d", i);
        cr_assert_eq(gradcheck(name, f_conv, (void *)c, c->bias ? 3 : 2, in, o), 0, "case %d", i);
        gc_free(3, in);
        nn_step_end();
    }
}

/* The backward over several tiles, checked exactly against the adjoint identity
 * <conv(x), gy> = <x, gx> = <w, gw> (the op is bilinear), which finite differences on this size
 * would be too slow for. */
Test(nn_conv, backward_over_several_tiles_is_the_adjoint) {
    const cv_case c = {3, 16, 131, 130, 4, 3, 3, 2, 1, 1, 1, 1, 1, 1, 0};
    tensor *in[3];
    make_inputs(&c, in, 70);
    tensor *y = f_conv(in, (void *)&c);
    int64_t n = tensor_numel(y);
    float *gy = malloc(sizeof(float) * n);
    rng_t r = rng_make(3, rng_stream(RNG_SAMPLING, 5, 0));
    double lhs = 0;
    for (int64_t i = 0; i < n; i++) {
        gy[i] = 2.0f * rng_uniform(&r) - 1.0f;
        lhs += (double)gy[i] * y->data[i];
    }
    cr_assert_eq(backward_with(y, tensor_from_host(4, y->shape, gy)), ER_OK, "%s", er_msg());
    for (int t = 0; t < 2; t++) {
        double rhs = 0;
        for (int64_t i = 0; i < tensor_numel(in[t]); i++) rhs += (double)in[t]->data[i] * in[t]->grad->data[i];
        cr_assert(fabs(lhs - rhs) <= 1e-4 * fabs(lhs), "input %d: <y, gy> %.9g, <x, gx> %.9g", t, lhs, rhs);
    }
    free(gy);
    gc_free(3, in);
    nn_step_end();
}

Test(nn_conv, bad_shapes_are_refused_with_a_message) {
    tensor *x = tensor_new(4, SHAPE(1, 3, 5, 5)), *w = tensor_new(4, SHAPE(4, 3, 3, 3));
    tensor *w2 = tensor_new(4, SHAPE(4, 2, 3, 3)), *b5 = tensor_new(1, SHAPE(5));
    tensor *x3 = tensor_new(3, SHAPE(3, 5, 5)), *w7 = tensor_new(4, SHAPE(4, 3, 7, 7));
    cr_assert_null(op_conv2d(x3, w, NULL, 1, 0, 1, 1));
    cr_assert(strstr(er_msg(), "[N, C, H, W]"), "%s", er_msg());
    cr_assert_null(op_conv2d(x, w2, NULL, 1, 0, 1, 1));
    cr_assert(strstr(er_msg(), "weight [4, 2, 3, 3]"), "%s", er_msg());
    cr_assert_null(op_conv2d(x, w, b5, 1, 0, 1, 1));
    cr_assert(strstr(er_msg(), "bias [5]"), "%s", er_msg());
    cr_assert_null(op_conv2d(x, w, NULL, 0, 0, 1, 1));
    cr_assert(strstr(er_msg(), "stride"), "%s", er_msg());
    cr_assert_null(op_conv2d(x, w7, NULL, 1, 0, 1, 1));
    cr_assert(strstr(er_msg(), "does not fit"), "%s", er_msg());
    cr_assert_not_null(op_conv2d(x, w7, NULL, 1, 1, 1, 1), "7x7 on 5x5 padded by 1 fits: %s", er_msg());
    cr_assert_null(op_conv2d(x, w, NULL, 1, 0, 1, 2));
    cr_assert(strstr(er_msg(), "groups 2"), "%s", er_msg());
    cr_assert_null(op_conv2d(NULL, w, NULL, 1, 0, 1, 1));
    tensor *all[] = {x, w, w2, b5, x3, w7};
    gc_free(6, all);
    nn_step_end();
}
