/* test_cuda_parity_resnet_nhwc.c — a ResNet in model.layout = nhwc trained on the device against
 * the same network on the CPU: 3 SGD steps (momentum) of a small basic-block and bottleneck ResNet
 * (width 4, one block a stage, so every stage's downsample runs; 4 images of 64 px) on
 * sum(features * R), in fp32 and in bf16 activations. The device runs cuDNN's NHWC convolutions and
 * the own batch-norm / pooling kernels, the CPU the reference kernels of the same table entries.
 *
 * Tolerances: fp32, the loss within 1e-4 relative at every step and the trained weights within
 * 1e-4 of each tensor's largest magnitude after the steps (cuDNN's sums in another order); bf16,
 * the loss within 2 % and the weights within 2 % (two backends rounding their own fp32 results
 * to bf16 through ~20 layers differ in a few last bits, which the steps carry). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/models/resnet.h"
#include "nn/ops.h"
#include "nn/precision.h"
#include "tests/cuda/parity_util.h"

enum { RB = 4, RIMG = 64, RSTEPS = 3 }; /* 16 values a channel at the last stage (see test_conv_nhwc_ops.c) */

typedef struct {
    resnet *r;
    param_list train;
    optimizer *opt;
    tensor *R;
    int dev;
} rn_side;

static void rn_build(rn_side *s, int dev, int depth) {
    resnet_config c;
    cr_assert_eq(resnet_config_preset(depth == 18 ? "resnet18" : "resnet50", &c), ER_OK);
    c.width = 4, c.num_classes = 0, c.layout = RESNET_NHWC;
    c.blocks[0] = c.blocks[1] = c.blocks[2] = c.blocks[3] = 1;
    memset(s, 0, sizeof *s);
    s->dev = dev;
    s->r = resnet_new(&c, 31);
    cr_assert_not_null(s->r, "%s", er_msg());
    cr_assert_eq(params_to_device(&s->r->params, dev), ER_OK, "%s", er_msg());
    optim_config oc = {.kind = OPTIM_SGD, .lr = 0.05, .momentum = 0.9};
    s->opt = optim_new(&oc, &s->r->params);
    cr_assert_not_null(s->opt, "%s", er_msg());
    float *R = rnd((int64_t)RB * s->r->features, -1, 1, 77);
    s->R = tensor_new_on(dev, 2, SHAPE(RB, s->r->features));
    tensor_copy_from_host(s->R, R);
    free(R);
}

static float rn_step(rn_side *s, int step, const float *img, int precision) {
    tensor *x = tensor_empty(s->dev, 4, SHAPE(RB, 3, RIMG, RIMG));
    tensor_copy_from_host(x, img);
    nn_ctx ctx = nn_ctx_train(1, step, 0, precision);
    tensor *loss = op_sum_all(op_mul(resnet_features(s->r, &ctx, x), s->R));
    cr_assert_not_null(loss, "%s", er_msg());
    float l = tensor_item(loss);
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    optim_step(s->opt);
    optim_zero_grad(s->opt);
    nn_step_end();
    return l;
}

static void rn_free(rn_side *s) {
    optim_free(s->opt);
    tensor_free(s->R);
    resnet_free(s->r);
}

static void rn_match(int depth, int precision, double tol) {
    require_gpu();
    rn_side c, g;
    rn_build(&c, DEV_CPU, depth);
    rn_build(&g, GPU_DEV, depth);
    float *img = rnd(RB * 3 * RIMG * RIMG, -1, 1, 78);
    for (int step = 0; step < RSTEPS; step++) {
        float lc = rn_step(&c, step, img, precision), lg = rn_step(&g, step, img, precision);
        gpu_ok("resnet nhwc step");
        cr_log_info("resnet%d nhwc %s step %d: loss cpu %.8g cuda %.8g", depth,
                    precision == ER_PREC_BF16 ? "bf16" : "fp32", step, lc, lg);
        cr_assert(fabsf(lc - lg) <= tol * fmaxf(fabsf(lc), 1e-3f), "resnet%d step %d: loss cpu %.8g, cuda %.8g",
                  depth, step, lc, lg);
    }
    for (int i = 0; i < c.r->params.n; i++) {
        tensor *tc = c.r->params.t[i], *tg = g.r->params.t[i];
        int64_t n = tensor_numel(tc);
        float *hc = malloc(sizeof(float) * n), *hg = malloc(sizeof(float) * n);
        tensor_to_host(tc, hc);
        tensor_to_host(tg, hg);
        double scale = 0, worst = 0;
        for (int64_t k = 0; k < n; k++) scale = fmax(scale, fabs(hc[k]));
        for (int64_t k = 0; k < n; k++) worst = fmax(worst, fabs((double)hc[k] - hg[k]));
        cr_assert(worst <= tol * scale, "resnet%d: %s after %d steps differs by %.3g (largest %.3g)", depth, tc->name,
                  RSTEPS, worst, scale);
        free(hc), free(hg);
    }
    free(img);
    rn_free(&c);
    rn_free(&g);
}

Test(cuda, resnet_nhwc_training_on_device_matches_cpu) {
    rn_match(18, ER_PREC_FP32, 1e-4);
    rn_match(50, ER_PREC_FP32, 1e-4);
}

Test(cuda, resnet_nhwc_bf16_training_on_device_tracks_cpu) {
    rn_match(18, ER_PREC_BF16, 2e-2);
    rn_match(50, ER_PREC_BF16, 2e-2);
}
