/* The channels-last image ops (nn/ops_conv_nhwc.c) through the op layer: finite-difference gradients
 * of each op (the shortcut + ReLU of batch norm included), the ops against their NCHW forms on
 * permuted data, and a ResNet in model.layout = nhwc against the same network in NCHW: features,
 * every parameter gradient and the running statistics after a training forward (fp32: the layout
 * alone changes summation orders; bf16 activations: the stated bf16 tolerance). The kernels' own
 * tests are tests/kernels/test_conv_nhwc.c, test_bnorm_nhwc.c and the CUDA parity files. */
#include <math.h>
#include <string.h>

#include "nn/models/model.h"
#include "nn/models/resnet.h"
#include "nn/precision.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static const int S2[2] = {2, 2}, S1[2] = {1, 1}, P1[2] = {1, 1}, D1[2] = {1, 1};

static tensor *f_conv(tensor **in, void *ctx) {
    return op_conv2d_nhwc(in[0], in[1], ctx ? S2 : S1, P1, D1, 1, GEMM_COMPUTE_FP32);
}

static tensor *f_bn_add_relu(tensor **in, void *ctx) {
    return op_batchnorm_nhwc(in[0], in[1], in[2], NULL, NULL, 1, 0.1f, 1e-5f, ctx ? in[3] : NULL, 1);
}

static tensor *f_pool(tensor **in, void *ctx) {
    tensor *y = op_maxpool2d_nhwc(in[0], 3, 2, 1);
    return ctx ? op_global_avgpool_nhwc(y) : y;
}

Test(nn_conv_nhwc, finite_difference_gradients) {
    gc_opts o = gc_default();
    tensor *c[2] = {gc_rand(4, SHAPE(2, 5, 5, 3), 1, -1, 1), gc_rand(4, SHAPE(4, 3, 3, 3), 2, -1, 1)};
    cr_assert_eq(gradcheck("conv2d_nhwc stride 1", f_conv, NULL, 2, c, o), 0);
    cr_assert_eq(gradcheck("conv2d_nhwc stride 2", f_conv, (void *)1, 2, c, o), 0);
    gc_free(2, c);
    /* values away from the ReLU's kink: the shortcut shifts half the outputs well below 0 */
    tensor *b[4] = {gc_rand(4, SHAPE(2, 3, 3, 4), 3, -2, 2), gc_rand(1, SHAPE(4), 4, 0.5f, 1.5f),
                    gc_rand(1, SHAPE(4), 5, -0.5f, 0.5f), gc_rand(4, SHAPE(2, 3, 3, 4), 6, -2, 2)};
    cr_assert_eq(gradcheck("batchnorm_nhwc + relu", f_bn_add_relu, NULL, 3, b, o), 0);
    cr_assert_eq(gradcheck("batchnorm_nhwc + shortcut + relu", f_bn_add_relu, (void *)1, 4, b, o), 0);
    gc_free(4, b);
    tensor *p = gc_rand(4, SHAPE(2, 7, 6, 3), 7, -1, 1);
    cr_assert_eq(gradcheck("maxpool2d_nhwc", f_pool, NULL, 1, &p, o), 0);
    cr_assert_eq(gradcheck("maxpool2d_nhwc + global_avgpool_nhwc", f_pool, (void *)1, 1, &p, o), 0);
    gc_free(1, &p);
}

/* max |a - b| <= tol * max |b| */
static void expect_rel(const char *what, const float *a, const float *b, int64_t n, double tol) {
    double scale = 0, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= worst)) worst = fabs((double)a[i] - b[i]), at = i;
    cr_assert(worst <= tol * scale, "%s: element %lld of %lld: %.8g against %.8g (largest %.4g, tol %g)", what,
              (long long)at, (long long)n, a[at], b[at], scale, tol);
}

Test(nn_conv_nhwc, block_tail_matches_nchw_ops) {
    /* bn(x) + z then ReLU, channels-last, against op_batchnorm2d, op_add_relu on the NCHW tensors */
    tensor *x = gc_rand(4, SHAPE(2, 4, 3, 5), 11, -2, 2), *z = gc_rand(4, SHAPE(2, 4, 3, 5), 12, -2, 2);
    tensor *w = gc_rand(1, SHAPE(4), 13, 0.5f, 1.5f), *b = gc_rand(1, SHAPE(4), 14, -0.5f, 0.5f);
    tensor *rm[2], *rv[2];
    float got[2][120], gx[2][120], gz[2][120], gw[2][4], gb[2][4], run[2][8];
    for (int v = 0; v < 2; v++) {
        rm[v] = tensor_new(1, SHAPE(4)), rv[v] = tensor_new(1, SHAPE(4));
        for (int i = 0; i < 4; i++) rv[v]->data[i] = 1;
        tensor *y = v ? op_to_nchw(op_batchnorm_nhwc(op_to_nhwc(x, DT_F32), w, b, rm[v], rv[v], 1, 0.1f, 1e-5f,
                                                     op_to_nhwc(z, DT_F32), 1), DT_F32)
                      : op_add_relu(op_batchnorm2d(x, w, b, rm[v], rv[v], 1, 0.1f, 1e-5f), z);
        cr_assert_not_null(y, "%s", er_msg());
        tensor *R = gc_rand(4, SHAPE(2, 4, 3, 5), 15, -1, 1);
        cr_assert_eq(backward(op_sum_all(op_mul(y, R))), ER_OK, "%s", er_msg());
        tensor_to_host(y, got[v]);
        memcpy(gx[v], x->grad->data, sizeof gx[v]), memcpy(gz[v], z->grad->data, sizeof gz[v]);
        memcpy(gw[v], w->grad->data, sizeof gw[v]), memcpy(gb[v], b->grad->data, sizeof gb[v]);
        memcpy(run[v], rm[v]->data, 16), memcpy(run[v] + 4, rv[v]->data, 16);
        tensor *all[4] = {x, z, w, b};
        for (int i = 0; i < 4; i++) tensor_fill(all[i]->grad, 0.0f);
        tensor_free(R);
        nn_step_end();
    }
    expect_rel("y", got[1], got[0], 120, 1e-6);
    expect_rel("x's gradient", gx[1], gx[0], 120, 1e-5);
    expect_rel("shortcut's gradient", gz[1], gz[0], 120, 1e-6);
    expect_rel("weight's gradient", gw[1], gw[0], 4, 1e-5);
    expect_rel("bias's gradient", gb[1], gb[0], 4, 1e-6);
    expect_rel("running statistics", run[1], run[0], 8, 1e-6);
    tensor *all[8] = {x, z, w, b, rm[0], rv[0], rm[1], rv[1]};
    for (int i = 0; i < 8; i++) tensor_free(all[i]);
}

Test(nn_conv_nhwc, shortcut_must_be_another_tensor_of_the_same_kind) {
    tensor *x = gc_rand(4, SHAPE(1, 2, 2, 3), 1, -1, 1), *z = gc_rand(4, SHAPE(1, 2, 3, 2), 2, -1, 1);
    cr_assert_null(op_batchnorm_nhwc(x, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f, z, 1));
    cr_assert(strstr(er_msg(), "shortcut [1, 2, 3, 2]"), "%s", er_msg());
    cr_assert_null(op_batchnorm_nhwc(x, NULL, NULL, NULL, NULL, 1, 0.1f, 1e-5f, x, 1));
    cr_assert_null(op_conv2d_nhwc(op_cast(x, DT_BF16), z, S1, P1, D1, 1, GEMM_COMPUTE_FP32));
    cr_assert(strstr(er_msg(), "bf16 input needs bf16 compute"), "%s", er_msg());
    tensor_free(x), tensor_free(z);
    nn_step_end();
}

/* One training forward + backward of `depth` (width 4, 2 images of 32 px) in a layout and
 * precision: features [2, F], then every parameter gradient and the running statistics, packed. */
static int64_t resnet_run(int depth, int layout, int precision, float *feat, float *grads, float *stats) {
    resnet_config c;
    cr_assert_eq(resnet_config_preset(depth == 18 ? "resnet18" : "resnet50", &c), ER_OK);
    c.width = 4, c.num_classes = 0, c.layout = layout;
    c.blocks[0] = c.blocks[1] = c.blocks[2] = c.blocks[3] = 1;
    resnet *r = resnet_new(&c, 5);
    cr_assert_not_null(r, "%s", er_msg());
    float img[2 * 3 * 32 * 32];
    for (int i = 0; i < 2 * 3 * 32 * 32; i++) img[i] = sinf(0.37f * i) + 0.1f * (i % 7);
    tensor *x = tensor_from_host_new(4, SHAPE(2, 3, 32, 32), img);
    nn_ctx ctx = {.training = 1, .precision = precision};
    tensor *f = resnet_features(r, &ctx, x);
    cr_assert_not_null(f, "%s", er_msg());
    tensor *R = gc_rand(2, f->shape, 9, -1, 1);
    cr_assert_eq(backward(op_sum_all(op_mul(f, R))), ER_OK, "%s", er_msg());
    tensor_to_host(f, feat);
    int64_t ng = 0, ns = 0, nf = tensor_numel(f);
    for (int i = 0; i < r->params.n; i++) {
        tensor *t = r->params.t[i];
        if (t->grad) tensor_to_host(t->grad, grads + ng), ng += tensor_numel(t);
        else tensor_to_host(t, stats + ns), ns += tensor_numel(t);
    }
    tensor_free(R), tensor_free(x);
    nn_step_end();
    resnet_free(r);
    return nf | ng << 20 | ns << 40;
}

static void layouts_agree(int depth, int precision, double tol_f, double tol_g) {
    static float f[2][4096], g[2][1 << 18], s[2][4096];
    int64_t k0 = resnet_run(depth, RESNET_NCHW, ER_PREC_FP32, f[0], g[0], s[0]);
    int64_t k1 = resnet_run(depth, RESNET_NHWC, precision, f[1], g[1], s[1]);
    cr_assert_eq(k0, k1);
    int64_t nf = k0 & 0xFFFFF, ng = k0 >> 20 & 0xFFFFF, ns = k0 >> 40;
    cr_assert(ng <= (1 << 18) && nf <= 4096 && ns <= 4096);
    expect_rel("features", f[1], f[0], nf, tol_f);
    expect_rel("parameter gradients", g[1], g[0], ng, tol_g);
    expect_rel("running statistics", s[1], s[0], ns, tol_f);
}

Test(nn_conv_nhwc, resnet_nhwc_fp32_matches_nchw) {
    /* the same arithmetic in another summation order: features and running statistics within 1e-5 of
     * their largest value, gradients (through ~10 batch norms) within 1e-4 */
    layouts_agree(18, ER_PREC_FP32, 1e-5, 1e-4);
    layouts_agree(50, ER_PREC_FP32, 1e-5, 1e-4);
}

Test(nn_conv_nhwc, resnet_nhwc_bf16_tracks_fp32) {
    /* bf16 activations and products (2^-8 relative per rounding) through a dozen layers: the stated
     * bounds are 4 % of the largest feature and 10 % of the largest gradient; a wrong layout or a
     * dropped shortcut is off by the magnitude itself */
    layouts_agree(18, ER_PREC_BF16, 0.04, 0.10);
    layouts_agree(50, ER_PREC_BF16, 0.04, 0.10);
}

Test(nn_conv_nhwc, model_layout_key_gives_the_same_descriptor) {
    char *nchw[] = {"model.width=4", "model.img=32"}, *nhwc[] = {"model.width=4", "model.img=32", "model.layout=nhwc"};
    char *bad[] = {"model.layout=nwhc"};
    model *m[2] = {NULL, NULL}, *mb = NULL;
    cr_assert_eq(model_create("resnet18", NULL, nchw, 2, &m[0]), ER_OK, "%s", er_msg());
    cr_assert_eq(model_create("resnet18", NULL, nhwc, 3, &m[1]), ER_OK, "%s", er_msg());
    cr_assert_eq(((resnet *)m[1]->impl)->cfg.layout, RESNET_NHWC);
    cr_assert_neq(model_create("resnet18", NULL, bad, 1, &mb), ER_OK);
    cr_assert(strstr(er_msg(), "model.layout"), "%s", er_msg());
    float img[2 * 3 * 32 * 32], e[2][64];
    for (int i = 0; i < 2 * 3 * 32 * 32; i++) img[i] = cosf(0.21f * i);
    for (int v = 0; v < 2; v++) cr_assert_eq(model_embed(m[v], img, 2, e[v]), ER_OK, "%s", er_msg());
    expect_rel("descriptor", e[1], e[0], 64, 1e-5);
    model_free(m[0]), model_free(m[1]);
}
