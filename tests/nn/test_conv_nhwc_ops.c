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

/* ctx NULL: batch norm + ReLU; else + shortcut, no ReLU (a finite difference across the ReLU's kink
 * is wrong, and the shortcut moves outputs onto it: block_tail_matches_nchw_ops checks the mask) */
static tensor *f_bn_add_relu(tensor **in, void *ctx) {
    return op_batchnorm_nhwc(in[0], in[1], in[2], NULL, NULL, 1, 0.1f, 1e-5f, ctx ? in[3] : NULL, !ctx);
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
    tensor *b[4] = {gc_rand(4, SHAPE(2, 3, 3, 4), 3, -2, 2), gc_rand(1, SHAPE(4), 4, 0.5f, 1.5f),
                    gc_rand(1, SHAPE(4), 5, -0.5f, 0.5f), gc_rand(4, SHAPE(2, 3, 3, 4), 6, -2, 2)};
    cr_assert_eq(gradcheck("batchnorm_nhwc + relu", f_bn_add_relu, NULL, 3, b, o), 0);
    cr_assert_eq(gradcheck("batchnorm_nhwc + shortcut", f_bn_add_relu, (void *)1, 4, b, o), 0);
    gc_free(4, b);
    /* max pooling: distinct values 0.1 apart, shuffled, so a step of eps moves no maximum */
    tensor *p = gc_rand(4, SHAPE(2, 7, 6, 3), 7, -1, 1);
    rng_t r = rng_make(8, rng_stream(RNG_SAMPLING, 6, 0));
    for (int64_t i = 0; i < 252; i++) p->data[i] = (float)i * 0.1f - 12.0f;
    for (int64_t i = 251; i > 0; i--) {
        int64_t j = rng_below(&r, (uint32_t)(i + 1));
        float t = p->data[i];
        p->data[i] = p->data[j], p->data[j] = t;
    }
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

/* One training forward + backward of `depth` (width 4, TN images of TIMG px) in a layout and
 * precision: features [TN, F], then every parameter gradient and the running statistics, packed.
 * 4 images of 64 px leave 16 values per channel to the last stage's batch norm: with 2 (2 images of
 * 32 px) two nearly equal values normalise to +-1 whatever they are, and bf16's rounding decides
 * which is which. */
enum { TN = 4, TIMG = 64 };
static int64_t resnet_run(int depth, int layout, int precision, int training, float *feat, float *grads, float *stats) {
    resnet_config c;
    cr_assert_eq(resnet_config_preset(depth == 18 ? "resnet18" : "resnet50", &c), ER_OK);
    c.width = 4, c.num_classes = 0, c.layout = layout;
    c.blocks[0] = c.blocks[1] = c.blocks[2] = c.blocks[3] = 1;
    resnet *r = resnet_new(&c, 5);
    cr_assert_not_null(r, "%s", er_msg());
    static float img[TN * 3 * TIMG * TIMG];
    for (int i = 0; i < TN * 3 * TIMG * TIMG; i++) img[i] = sinf(0.37f * i) + 0.1f * (i % 7);
    tensor *x = tensor_from_host_new(4, SHAPE(TN, 3, TIMG, TIMG), img);
    nn_ctx ctx = {.training = training, .precision = precision};
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

static double rel_l2(const float *a, const float *b, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), r += (double)b[i] * b[i];
    return sqrt(e / r);
}

static float F[2][4096], G[2][1 << 18], S[2][4096];

/* the NHWC run (precision, training) against the NCHW fp32 run; the counts of features, gradients */
static void nhwc_against_nchw_fp32(int depth, int precision, int training, int64_t *nf, int64_t *ng, int64_t *ns) {
    int64_t k0 = resnet_run(depth, RESNET_NCHW, ER_PREC_FP32, training, F[0], G[0], S[0]);
    int64_t k1 = resnet_run(depth, RESNET_NHWC, precision, training, F[1], G[1], S[1]);
    cr_assert_eq(k0, k1);
    *nf = k0 & 0xFFFFF, *ng = k0 >> 20 & 0xFFFFF, *ns = k0 >> 40;
    cr_assert(*ng <= (1 << 18) && *nf <= 4096 && *ns <= 4096);
}

Test(nn_conv_nhwc, resnet_nhwc_fp32_matches_nchw) {
    /* the same arithmetic in another summation order: features and running statistics within 1e-5 of
     * their largest value, gradients (through ~10 batch norms) within 1e-4 */
    for (int d = 18; d <= 50; d += 32) {
        int64_t nf, ng, ns;
        nhwc_against_nchw_fp32(d, ER_PREC_FP32, 1, &nf, &ng, &ns);
        expect_rel("features", F[1], F[0], nf, 1e-5);
        expect_rel("parameter gradients", G[1], G[0], ng, 1e-4);
        expect_rel("running statistics", S[1], S[0], ns, 1e-5);
    }
}

Test(nn_conv_nhwc, resnet_nhwc_bf16_tracks_fp32) {
    /* bf16 activations and gradients against the fp32 network, as relative L2 errors. The kernels are
     * bit-exact against fp32 on rounded inputs (their own tests); here the question is whether the
     * network stays near. Measured (width 4, 4 images of 64 px), NHWC bf16 / the NCHW path's bf16
     * compute on fp32 storage: features 0.007 / 0.005 (eval), 0.019-0.058 / 0.016-0.041 (training);
     * gradients 0.085-0.146 / 0.080-0.152 (eval), 0.36-0.50 / 0.21-0.26 (training: batch norm's
     * backward subtracts two means of the bf16 gradient, and with 16 values a channel at the last
     * stage the difference is small). Bounds: features 0.1, eval gradients 0.25, training gradients
     * 0.7; a transposed layout or a lost shortcut is off by about 1. */
    for (int d = 18; d <= 50; d += 32)
        for (int tr = 0; tr < 2; tr++) {
            int64_t nf, ng, ns;
            nhwc_against_nchw_fp32(d, ER_PREC_BF16, tr, &nf, &ng, &ns);
            double ef = rel_l2(F[1], F[0], nf), eg = rel_l2(G[1], G[0], ng);
            cr_log_info("resnet%d bf16 nhwc, training %d: features %.4g, gradients %.4g", d, tr, ef, eg);
            cr_assert(ef <= 0.1 && eg <= (tr ? 0.7 : 0.25), "resnet%d training %d: relative L2 error of the features %.4g, "
                      "of the gradients %.4g", d, tr, ef, eg);
            if (tr) expect_rel("running statistics", S[1], S[0], ns, 0.05);
        }
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
    /* a saved file takes the layout as a run's choice (embed --model F --set model.layout=nhwc) and
     * refuses a key the file fixes, by name */
    char path[256], *lay[] = {"model.layout=nhwc"}, *fixed[] = {"model.width=8"};
    snprintf(path, sizeof path, "%s/r.safetensors", test_tmpdir());
    cr_assert_eq(model_save(m[0], path, -1), ER_OK, "%s", er_msg());
    model *ml = NULL;
    cr_assert_eq(model_load(path, NULL, lay, 1, &ml), ER_OK, "%s", er_msg());
    cr_assert_eq(((resnet *)ml->impl)->cfg.layout, RESNET_NHWC);
    cr_assert_eq(ml->img, 32, "the file's img stays when only the layout is set");
    cr_assert_eq(model_embed(ml, img, 2, e[1]), ER_OK, "%s", er_msg());
    expect_rel("descriptor of the loaded file", e[1], e[0], 64, 1e-5);
    model_free(ml);
    cr_assert_eq(model_load(path, NULL, fixed, 1, &ml), ER_INPUT);
    cr_assert(strstr(er_msg(), "'model.width=8': a ResNet file fixes everything but model.img and model.layout"), "%s",
              er_msg());
    model_free(m[0]), model_free(m[1]);
}

