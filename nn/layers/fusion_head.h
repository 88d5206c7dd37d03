/* fusion_head.h — the dual-backbone paper's fusion head (the training definition of the reference's
 * DualBackboneWrapper, spec section 2.6):
 *
 *   e = L2( GELU( BatchNorm1d( Linear( concat[ L2(f_1), ..., L2(f_n) ] ) ) ) )
 *
 * with n = 2 branches of 384 -> 768 -> 512 in the paper; n = 1 gives the single-backbone head
 * (384 -> 512). BatchNorm1d is op_batchnorm2d on [B, C] (torch semantics: batch statistics and
 * running-stat updates in training, running statistics in eval); the running mean / var are
 * buffers (no gradient, saved and restored). Names are those of an nn.Sequential(Linear,
 * BatchNorm1d, GELU) called `<prefix>`: <prefix>.0.weight/bias, <prefix>.1.weight/bias/
 * running_mean/running_var. The inference.py copy in the reference (ReLU, no branch L2) is not
 * followed. */
#ifndef ENDORET_FUSION_HEAD_H
#define ENDORET_FUSION_HEAD_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/tensor.h"

typedef struct {
    int in, out;
    tensor *w, *b;                    /* Linear [out, in], [out] */
    tensor *bn_w, *bn_b;              /* BatchNorm1d affine [out] */
    tensor *bn_mean, *bn_var;         /* running statistics (buffers) [out] */
} fusion_head;

/* torch's defaults: Linear U(-1/sqrt(in), 1/sqrt(in)) for weight and bias, BN weight 1, bias 0,
 * running mean 0, var 1. Tensors appended to pl. */
void fusion_head_init(fusion_head *h, const char *prefix, int in, int out, uint64_t seed, param_list *pl);
/* branches: n tensors [B, C_i] with sum C_i = in -> [B, out], L2-normalised. */
tensor *fusion_head_forward(const fusion_head *h, const nn_ctx *ctx, tensor *const *branches, int n);

#endif
