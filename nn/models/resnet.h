/* resnet.h — ResNet (torchvision layout, v1.5: the stride of a bottleneck sits on its 3x3 conv),
 * the backbone of PGCon / WINCon (../shared/spec/pgcon_dual_vss.md section 1).
 *
 *   image [N,3,H,W] -> conv1 7x7/2 -> bn1 -> relu -> maxpool 3x3/2 -> layer1..layer4 -> global
 *   average pool -> [N, F] -> fc (when num_classes > 0)
 *   basic block (18/34):      relu(bn2(conv2(relu(bn1(conv1 3x3/s(x))))) + shortcut(x))
 *   bottleneck (50/101/152):  relu(bn3(conv3 1x1(relu(bn2(conv2 3x3/s(relu(bn1(conv1 1x1(x)))))))) + shortcut(x))
 *   shortcut: x, or downsample.0 (1x1/s conv) + downsample.1 (bn) when the shape changes.
 *
 * Tensor names are torchvision's ("conv1.weight", "bn1.running_mean", "layer2.0.downsample.1.weight",
 * "fc.bias"), so its state dicts load by name; batch-norm running statistics are buffers in the
 * param_list without T_REQUIRES_GRAD (torchvision's num_batches_tracked counters are not kept: they
 * only matter for momentum=None). Registered as the "resnet" model_arch in resnet_model.c. */
#ifndef ENDORET_RESNET_H
#define ENDORET_RESNET_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/tensor.h"

typedef struct {
    int depth;          /* 18, 34, 50, 101 or 152: picks the block kind and, by default, blocks[] */
    int blocks[4];      /* blocks per stage (resnet_config_preset fills torchvision's) */
    int width;          /* channels of the stem and of stage 1's 3x3 convs: 64 as torchvision */
    int num_classes;    /* fc outputs; 0 = no fc, the pooled features are the output */
    float bn_momentum;  /* 0.1 */
    float bn_eps;       /* 1e-5 */
    /* PGCon / WINCon heads (spec pgcon_dual_vss.md 1.5), 0 = none:
     *   projection_original_features = Linear(features, proj_dim), shared by every view;
     *   connect_patches_feature      = Linear(jigsaw_tiles * proj_dim, proj_dim), the jigsaw head. */
    int proj_dim;
    int jigsaw_tiles;
    /* data-parallel training: batch statistics over every rank's rows (nn/layers/sync_batchnorm.h);
     * one process or eval mode: plain batch norm */
    int sync_bn;
    /* activations' memory layout in training and inference (not saved: the weights are the same):
     * RESNET_NCHW, or RESNET_NHWC (channels-last, activations in the context's dtype: bf16 under
     * bf16, what cuDNN's tensor cores read without transposes; nn/ops_conv_nhwc.c). 0 = NCHW. */
    int layout;
} resnet_config;

enum { RESNET_NCHW = 0, RESNET_NHWC = 1 };

/* Depth 50 and above: bottleneck blocks; 18 and 34: basic blocks. */
static inline int resnet_is_bottleneck(int depth) { return depth >= 50; }

/* resnet18 / resnet34 / resnet50 / resnet101 / resnet152, width 64, 1000 classes. */
int resnet_config_preset(const char *name, resnet_config *c);

typedef struct {
    tensor *w, *b, *running_mean, *running_var;
} resnet_bn;

typedef struct {
    int stride, bottleneck;
    tensor *conv[3];    /* conv1, conv2 (+ conv3 for a bottleneck) */
    resnet_bn bn[3];
    tensor *down;       /* downsample.0 weight, NULL for an identity shortcut */
    resnet_bn down_bn;
} resnet_block;

typedef struct {
    resnet_config cfg;
    int features;       /* width of the pooled features: 8 width (basic) or 32 width (bottleneck) */
    tensor *conv1;
    resnet_bn bn1;
    resnet_block *blocks;
    int nblocks;
    tensor *fc_w, *fc_b;
    tensor *proj_w, *proj_b;   /* projection_original_features, NULL without proj_dim */
    tensor *jig_w, *jig_b;     /* connect_patches_feature, NULL without jigsaw_tiles */
    param_list params;  /* weights and the running-statistics buffers, torchvision's order */
} resnet;

/* A new network initialised from `seed` as torchvision does (convs: Kaiming normal, fan_out, ReLU
 * gain; BN weight 1, bias 0, running stats 0 / 1; fc: U(-1/sqrt(F), 1/sqrt(F))). NULL + er_msg on
 * a bad config. */
resnet *resnet_new(const resnet_config *c, uint64_t seed);
void resnet_free(resnet *r);

/* x [N, 3, H, W] on the network's device -> the last stage's map [N, features, H/32, W/32], before the
 * pooling (what region evidence compares, infer/report/region_evidence.h); fp32 NCHW in either layout. */
tensor *resnet_feature_map(resnet *r, const nn_ctx *ctx, tensor *x);
/* x [N, 3, H, W] on the network's device -> pooled features [N, features] (ctx->training: batch
 * statistics and running-stat updates, else running statistics). */
tensor *resnet_features(resnet *r, const nn_ctx *ctx, tensor *x);
/* resnet_features, then fc when num_classes > 0: torchvision's forward. */
tensor *resnet_forward(resnet *r, const nn_ctx *ctx, tensor *x);
/* Bytes one training forward + backward of N images of H x W keeps until the step ends: every conv,
 * batch-norm (a fused BN + ReLU is one), ReLU, add and pooling output (fp32) and max-pool indices, plus the largest convolution's
 * im2col scratch; x 1.125 for the step arena's slack (nn/arena.h), which also covers the frontier of
 * live activation gradients (backward recycles the finished ones). For the refusal of a run that
 * cannot fit (nn/base/memory.h). */
double resnet_train_bytes(const resnet_config *c, double N, int H, int W);
/* Trainable parameters of the config (convolutions, batch-norm affine, fc and PGCon heads). */
double resnet_param_count(const resnet_config *c);

/* PGCon's z = P(f(x)) [N, proj_dim] (not normalised): the prior / WIN / tile embedding. */
tensor *resnet_project(resnet *r, const nn_ctx *ctx, tensor *x);
/* The jigsaw embedding Q([u_1; ...; u_T]) [N, proj_dim] of tiles [N * T, 3, h, w] (tile t of item n
 * at row n * T + t): every tile through P(f(.)), concatenated per item, then Q. */
tensor *resnet_jigsaw(resnet *r, const nn_ctx *ctx, tensor *tiles);

#endif
