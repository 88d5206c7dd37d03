/* resnet.c — torchvision's ResNet built from the image ops (nn/ops.h); see resnet.h. */
#include "nn/models/resnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/process_group.h"
#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/layers/sync_batchnorm.h"
#include "nn/precision.h"
#include "nn/ops.h"

enum { RESNET_FAMILY = 3 }; /* init stream family (0 ViT, 1 MAE decoder, 2 SSCD head) */

int resnet_config_preset(const char *name, resnet_config *c) {
    static const struct {
        const char *name;
        int depth, blocks[4];
    } P[] = {{"resnet18", 18, {2, 2, 2, 2}},  {"resnet34", 34, {3, 4, 6, 3}},  {"resnet50", 50, {3, 4, 6, 3}},
             {"resnet101", 101, {3, 4, 23, 3}}, {"resnet152", 152, {3, 8, 36, 3}}};
    for (size_t i = 0; i < sizeof P / sizeof *P; i++)
        if (!strcmp(name, P[i].name)) {
            *c = (resnet_config){.depth = P[i].depth, .width = 64, .num_classes = 1000, .bn_momentum = 0.1f,
                                 .bn_eps = 1e-5f};
            memcpy(c->blocks, P[i].blocks, sizeof c->blocks);
            return ER_OK;
        }
    return er_fail(ER_INPUT, "resnet: unknown model '%s' (resnet18 | resnet34 | resnet50 | resnet101 | resnet152)", name);
}

/* Kaiming normal, mode fan_out, ReLU gain (torchvision's conv init): std = sqrt(2 / (K R S)). */
static tensor *conv_param(resnet *r, const char *name, int K, int C, int k, uint64_t seed) {
    tensor *t = layer_param(&r->params, name, 4, SHAPE(K, C, k, k));
    rng_t g = layer_param_rng(seed, &r->params, RESNET_FAMILY);
    init_normal(t->data, tensor_numel(t), 0.0f, sqrtf(2.0f / (float)(K * k * k)), &g);
    return t;
}

/* weight 1, bias 0 (parameters); running mean 0, running var 1 (buffers, no gradient) */
static resnet_bn bn_params(resnet *r, const char *prefix, int C) {
    char name[128];
    resnet_bn b;
    snprintf(name, sizeof name, "%s.weight", prefix);
    b.w = layer_param(&r->params, name, 1, SHAPE(C));
    init_ones(b.w->data, C);
    snprintf(name, sizeof name, "%s.bias", prefix);
    b.b = layer_param(&r->params, name, 1, SHAPE(C));
    init_zeros(b.b->data, C);
    tensor **buf[2] = {&b.running_mean, &b.running_var};
    const char *suffix[2] = {"running_mean", "running_var"};
    for (int i = 0; i < 2; i++) {
        tensor *t = tensor_new(1, SHAPE(C));
        snprintf(name, sizeof name, "%s.%s", prefix, suffix[i]);
        t->name = xstrdup(name);
        if (i) init_ones(t->data, C);
        params_add(&r->params, t);
        *buf[i] = t;
    }
    return b;
}

static int config_check(const resnet_config *c) {
    int ok = c->depth == 18 || c->depth == 34 || c->depth == 50 || c->depth == 101 || c->depth == 152;
    for (int i = 0; i < 4; i++) ok = ok && c->blocks[i] >= 1 && c->blocks[i] <= 64;
    if (c->proj_dim < 0 || c->proj_dim > 65536 || c->jigsaw_tiles < 0 || c->jigsaw_tiles > 64 ||
        (c->jigsaw_tiles > 0 && c->proj_dim == 0))
        return er_fail(ER_INPUT, "resnet: projection %d, jigsaw tiles %d: need projection 0..65536, tiles 0..64, and a "
                       "projection for a jigsaw head", c->proj_dim, c->jigsaw_tiles);
    if (c->layout == RESNET_NHWC && c->sync_bn && pg_size() > 1)
        return er_fail(ER_INPUT, "resnet: model.layout = nhwc has no synchronised batch norm for data-parallel training "
                       "(%d ranks, model.sync_bn on): set model.layout = nchw or model.sync_bn = false", pg_size());
    if (!ok || c->width < 1 || c->width > 1024 || c->num_classes < 0 || !(c->bn_eps > 0) ||
        !(c->bn_momentum >= 0 && c->bn_momentum <= 1))
        return er_fail(ER_INPUT, "resnet: depth %d, blocks %d/%d/%d/%d, width %d, classes %d: need depth 18|34|50|101|152, "
                       "1..64 blocks per stage, width 1..1024, classes >= 0, bn eps > 0, momentum in [0, 1]",
                       c->depth, c->blocks[0], c->blocks[1], c->blocks[2], c->blocks[3], c->width, c->num_classes);
    return ER_OK;
}

resnet *resnet_new(const resnet_config *c, uint64_t seed) {
    if (config_check(c)) return NULL;
    resnet *r = xcalloc(1, sizeof *r);
    r->cfg = *c;
    const int W = c->width, bott = resnet_is_bottleneck(c->depth), expansion = bott ? 4 : 1;
    r->conv1 = conv_param(r, "conv1.weight", W, 3, 7, seed);
    r->bn1 = bn_params(r, "bn1", W);
    r->nblocks = c->blocks[0] + c->blocks[1] + c->blocks[2] + c->blocks[3];
    r->blocks = xcalloc((size_t)r->nblocks, sizeof *r->blocks);
    int inplanes = W, bi = 0;
    char name[128];
    for (int s = 0; s < 4; s++) {
        int planes = W << s;
        for (int j = 0; j < c->blocks[s]; j++, bi++) {
            resnet_block *b = &r->blocks[bi];
            b->bottleneck = bott;
            b->stride = s > 0 && j == 0 ? 2 : 1;
            const int out = planes * expansion;
            /* torchvision's registration order: conv1, bn1, conv2, bn2, (conv3, bn3), downsample */
            const int ksz[3] = {bott ? 1 : 3, 3, 1};
            const int cin[3] = {inplanes, planes, planes}, cout[3] = {planes, bott ? planes : out, out};
            for (int k = 0; k < (bott ? 3 : 2); k++) {
                snprintf(name, sizeof name, "layer%d.%d.conv%d.weight", s + 1, j, k + 1);
                b->conv[k] = conv_param(r, name, cout[k], cin[k], ksz[k], seed);
                snprintf(name, sizeof name, "layer%d.%d.bn%d", s + 1, j, k + 1);
                b->bn[k] = bn_params(r, name, cout[k]);
            }
            if (b->stride != 1 || inplanes != out) {
                snprintf(name, sizeof name, "layer%d.%d.downsample.0.weight", s + 1, j);
                b->down = conv_param(r, name, out, inplanes, 1, seed);
                snprintf(name, sizeof name, "layer%d.%d.downsample.1", s + 1, j);
                b->down_bn = bn_params(r, name, out);
            }
            inplanes = out;
        }
    }
    r->features = inplanes;
    if (c->num_classes > 0) layer_linear(&r->params, "fc", c->num_classes, inplanes, seed, RESNET_FAMILY, &r->fc_w, &r->fc_b);
    if (c->proj_dim > 0)
        layer_linear(&r->params, "projection_original_features", c->proj_dim, inplanes, seed, RESNET_FAMILY, &r->proj_w, &r->proj_b);
    if (c->proj_dim > 0 && c->jigsaw_tiles > 0)
        layer_linear(&r->params, "connect_patches_feature", c->proj_dim, c->jigsaw_tiles * c->proj_dim, seed, RESNET_FAMILY,
                     &r->jig_w, &r->jig_b);
    return r;
}

void resnet_free(resnet *r) {
    if (!r) return;
    params_free(&r->params);
    free(r->blocks);
    free(r);
}

static tensor *bn(const resnet *r, const nn_ctx *ctx, tensor *x, const resnet_bn *b, int relu) {
    if (r->cfg.sync_bn)
        return sync_batchnorm2d(x, b->w, b->b, b->running_mean, b->running_var, ctx->training, r->cfg.bn_momentum,
                                r->cfg.bn_eps, relu);
    return (relu ? op_batchnorm2d_relu : op_batchnorm2d)(x, b->w, b->b, b->running_mean, b->running_var,
                                                         ctx->training, r->cfg.bn_momentum, r->cfg.bn_eps);
}

/* The stride of a block's k-th conv: it sits on the 3x3 conv (v1.5), conv2 of a bottleneck, conv1 of
 * a basic block; the padding of a conv is 1 for 3x3, 0 for 1x1. */
static int conv_stride(const resnet_block *b, int k) {
    return b->conv[k]->shape[2] == 3 && (b->bottleneck ? k == 1 : k == 0) ? b->stride : 1;
}

static tensor *block_forward(const resnet *r, const nn_ctx *ctx, const resnet_block *b, tensor *x) {
    tensor *h = x;
    int n = b->bottleneck ? 3 : 2;
    for (int k = 0; k < n; k++) {
        h = ac_conv2d(ctx, h, b->conv[k], NULL, conv_stride(b, k), b->conv[k]->shape[2] == 3, 1, 1);
        h = bn(r, ctx, h, &b->bn[k], k < n - 1);
    }
    tensor *sc = b->down ? bn(r, ctx, ac_conv2d(ctx, x, b->down, NULL, b->stride, 0, 1, 1), &b->down_bn, 0) : x;
    return op_add_relu(h, sc);
}

/* ---- channels-last (model.layout = nhwc): activations [N, H, W, C] in the context's dtype ---- */

static tensor *conv_nhwc(const nn_ctx *ctx, tensor *x, const tensor *w, int stride, int pad) {
    const int s[2] = {stride, stride}, p[2] = {pad, pad}, d[2] = {1, 1};
    return op_conv2d_nhwc(x, (tensor *)w, s, p, d, 1, er_gemm_compute_of(ctx ? ctx->precision : ER_PREC_FP32));
}

static tensor *bn_nhwc(const resnet *r, const nn_ctx *ctx, tensor *x, const resnet_bn *b, tensor *z, int relu) {
    return op_batchnorm_nhwc(x, b->w, b->b, b->running_mean, b->running_var, ctx->training, r->cfg.bn_momentum,
                             r->cfg.bn_eps, z, relu);
}

/* the block of block_forward; the last batch norm takes the shortcut and the ReLU in its pass */
static tensor *block_forward_nhwc(const resnet *r, const nn_ctx *ctx, const resnet_block *b, tensor *x) {
    tensor *h = x;
    int n = b->bottleneck ? 3 : 2;
    for (int k = 0; k < n - 1; k++)
        h = bn_nhwc(r, ctx, conv_nhwc(ctx, h, b->conv[k], conv_stride(b, k), b->conv[k]->shape[2] == 3), &b->bn[k], NULL,
                    1);
    tensor *sc = b->down ? bn_nhwc(r, ctx, conv_nhwc(ctx, x, b->down, b->stride, 0), &b->down_bn, NULL, 0) : x;
    return bn_nhwc(r, ctx, conv_nhwc(ctx, h, b->conv[n - 1], conv_stride(b, n - 1), b->conv[n - 1]->shape[2] == 3),
                   &b->bn[n - 1], sc, 1);
}

typedef tensor *(*block_fn)(const resnet *, const nn_ctx *, const resnet_block *, tensor *);

/* The last stage's map in the run's layout (NCHW fp32, or NHWC in the context's dtype). */
static tensor *feature_map(resnet *r, const nn_ctx *ctx, tensor *x, int nhwc) {
    if (!x) return NULL;
    if (x->ndim != 4 || x->shape[1] != 3) {
        char s[96];
        er_fail(ER_INPUT, "resnet: input %s: need [N, 3, H, W]", tensor_shape_str(x, s, sizeof s));
        return NULL;
    }
    tensor *h;
    block_fn block = nhwc ? block_forward_nhwc : block_forward;
    if (nhwc) {
        h = conv_nhwc(ctx, op_to_nhwc(x, ac_dtype(ctx)), r->conv1, 2, 3);
        h = op_maxpool2d_nhwc(bn_nhwc(r, ctx, h, &r->bn1, NULL, 1), 3, 2, 1);
    } else {
        h = ac_conv2d(ctx, x, r->conv1, NULL, 2, 3, 1, 1);
        h = op_maxpool2d(bn(r, ctx, h, &r->bn1, 1), 3, 2, 1);
    }
    if (!h || grad_enabled()) { /* the tape keeps every block's activations for the backward */
        for (int i = 0; i < r->nblocks; i++) h = block(r, ctx, &r->blocks[i], h);
        return h;
    }
    /* Inference: the arena frees only at the step's end (nn/arena.h), so each block runs above a
     * mark, its output is copied into one of two buffers taken first, and the arena is released back
     * to the mark: a forward holds one block's activations (as vit_blocks_forward). A block's output
     * has N * (conv[last] channels) * ((H - 1) / stride + 1) * ((W - 1) / stride + 1) elements in
     * either layout; the buffers hold the largest. Same values either way. */
    const int64_t N = h->shape[0];
    int64_t most = 0, H = h->shape[nhwc ? 1 : 2], W = h->shape[nhwc ? 2 : 3];
    for (int i = 0; i < r->nblocks; i++) {
        const resnet_block *b = &r->blocks[i];
        H = (H - 1) / b->stride + 1, W = (W - 1) / b->stride + 1;
        const int64_t n = N * b->conv[b->bottleneck ? 2 : 1]->shape[0] * H * W;
        if (n > most) most = n;
    }
    tensor *buf[2] = {tensor_empty_dt(h->device, h->dtype, 1, SHAPE(most)), tensor_empty_dt(h->device, h->dtype, 1, SHAPE(most))};
    arena *a = arena_default(h->device);
    for (int i = 0; i < r->nblocks && h; i++) {
        arena_mark m = arena_get_mark(a);
        h = tensor_keep_released(block(r, ctx, &r->blocks[i], h), buf[i & 1], m);
    }
    return h;
}

/* (config_check refused channels-last with synchronised batch norm on several ranks: it has no
 * channels-last form yet) */
tensor *resnet_feature_map(resnet *r, const nn_ctx *ctx, tensor *x) {
    int nhwc = r->cfg.layout == RESNET_NHWC;
    tensor *h = feature_map(r, ctx, x, nhwc);
    return nhwc ? op_to_nchw(h, DT_F32) : h;
}

tensor *resnet_features(resnet *r, const nn_ctx *ctx, tensor *x) {
    int nhwc = r->cfg.layout == RESNET_NHWC;
    tensor *h = feature_map(r, ctx, x, nhwc);
    return nhwc ? op_global_avgpool_nhwc(h) : op_global_avgpool(h);
}

tensor *resnet_forward(resnet *r, const nn_ctx *ctx, tensor *x) {
    tensor *f = resnet_features(r, ctx, x);
    return r->cfg.num_classes > 0 ? ac_linear(ctx, f, r->fc_w, r->fc_b) : f;
}

tensor *resnet_project(resnet *r, const nn_ctx *ctx, tensor *x) {
    if (!r->proj_w) {
        er_fail(ER_INPUT, "resnet: no projection head (proj_dim = 0)");
        return NULL;
    }
    return ac_linear(ctx, resnet_features(r, ctx, x), r->proj_w, r->proj_b);
}

tensor *resnet_jigsaw(resnet *r, const nn_ctx *ctx, tensor *tiles) {
    if (!r->jig_w) {
        er_fail(ER_INPUT, "resnet: no jigsaw head (jigsaw_tiles = 0)");
        return NULL;
    }
    int T = r->cfg.jigsaw_tiles;
    if (tiles && tiles->shape[0] % T) {
        er_fail(ER_INPUT, "resnet_jigsaw: %lld tiles is not a multiple of %d", (long long)tiles->shape[0], T);
        return NULL;
    }
    tensor *u = resnet_project(r, ctx, tiles); /* [N * T, P], item-major */
    if (!u) return NULL;
    u = op_reshape(u, 2, SHAPE(u->shape[0] / T, T * r->cfg.proj_dim));
    return ac_linear(ctx, u, r->jig_w, r->jig_b);
}

static int conv_out(int in, int k, int st, int pad) { return (in + 2 * pad - k) / st + 1; }

double resnet_train_bytes(const resnet_config *c, double N, int H, int W) {
    double kept = 3.0 * H * W, scratch = 0; /* floats per image */
    int h = conv_out(H, 7, 2, 3), w = conv_out(W, 7, 2, 3), width = c->width;
    kept += 2.0 * width * h * w;              /* conv1, bn1 + relu (one tensor: fused) */
    scratch = 3.0 * 49 * h * w;
    h = conv_out(h, 3, 2, 1), w = conv_out(w, 3, 2, 1);
    kept += 1.5 * width * h * w;              /* maxpool out + int32 indices (half counted: same size) */
    int bott = resnet_is_bottleneck(c->depth), inplanes = width;
    for (int s = 0; s < 4; s++) {
        int planes = width << s, out = bott ? 4 * planes : planes;
        for (int b = 0; b < c->blocks[s]; b++) {
            int st = b == 0 && s > 0 ? 2 : 1, ho = conv_out(h, 3, st, 1), wo = conv_out(w, 3, st, 1);
            if (bott) {
                kept += 2.0 * planes * h * w;      /* conv1 1x1, bn + relu at the input size */
                kept += 2.0 * planes * ho * wo;    /* conv2 3x3/st, bn + relu */
                kept += 2.0 * out * ho * wo;       /* conv3 1x1, bn */
                double col = 9.0 * planes * ho * wo;
                scratch = col > scratch ? col : scratch;
            } else {
                kept += 2.0 * planes * ho * wo + 2.0 * planes * ho * wo; /* conv, bn + relu; conv, bn */
                double col = 9.0 * (b == 0 ? inplanes : planes) * ho * wo;
                scratch = col > scratch ? col : scratch;
            }
            if (st != 1 || inplanes != out) kept += 2.0 * out * ho * wo; /* downsample conv + bn */
            kept += 1.0 * out * ho * wo;           /* residual add + relu (one tensor: fused) */
            inplanes = out, h = ho, w = wo;
        }
    }
    kept += 2.0 * inplanes;                        /* pooled features (+ heads: small) */
    /* the kept outputs, once: backward reuses the gradient buffers it has finished with (nn/autograd.c),
     * so the live gradients are a frontier of a few layers, inside the 1/8 of slack */
    return 1.125 * 4.0 * (kept * N + scratch * N);
}

double resnet_param_count(const resnet_config *c) {
    int width = c->width, bott = resnet_is_bottleneck(c->depth), inplanes = width;
    double n = 49.0 * 3 * width + 2.0 * width;
    for (int s = 0; s < 4; s++) {
        int planes = width << s, out = bott ? 4 * planes : planes;
        for (int b = 0; b < c->blocks[s]; b++) {
            int st = b == 0 && s > 0 ? 2 : 1;
            if (bott) n += (double)inplanes * planes + 9.0 * planes * planes + (double)planes * out + 2.0 * (2 * planes + out);
            else n += 9.0 * inplanes * planes + 9.0 * planes * planes + 4.0 * planes;
            if (st != 1 || inplanes != out) n += (double)inplanes * out + 2.0 * out;
            inplanes = out;
        }
    }
    if (c->num_classes > 0) n += (double)c->num_classes * (inplanes + 1);
    if (c->proj_dim > 0) n += (double)c->proj_dim * (inplanes + 1);
    if (c->proj_dim > 0 && c->jigsaw_tiles > 0) n += (double)c->proj_dim * (c->jigsaw_tiles * c->proj_dim + 1);
    return n;
}
