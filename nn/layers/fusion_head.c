/* fusion_head.c — L2 per branch, concat, Linear, BatchNorm1d, GELU, L2 (fusion_head.h). */
#include "nn/layers/fusion_head.h"

#include <math.h>
#include <stdio.h>

#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/layers/sync_batchnorm.h"
#include "nn/ops.h"

enum { FAMILY_FUSION = 6 }; /* init stream family (layer_params.h) */

void fusion_head_init(fusion_head *h, const char *prefix, int in, int out, uint64_t seed, param_list *pl) {
    char n[160];
    h->in = in; h->out = out;
    float bound = (float)(1.0 / sqrt((double)in));
    snprintf(n, sizeof n, "%s.0.weight", prefix);
    h->w = layer_param(pl, n, 2, SHAPE(out, in));
    { rng_t r = layer_param_rng(seed, pl, FAMILY_FUSION); init_uniform(h->w->data, (int64_t)out * in, -bound, bound, &r); }
    snprintf(n, sizeof n, "%s.0.bias", prefix);
    h->b = layer_param(pl, n, 1, SHAPE(out));
    { rng_t r = layer_param_rng(seed, pl, FAMILY_FUSION); init_uniform(h->b->data, out, -bound, bound, &r); }
    snprintf(n, sizeof n, "%s.1.weight", prefix);
    h->bn_w = layer_param(pl, n, 1, SHAPE(out));
    init_ones(h->bn_w->data, out);
    snprintf(n, sizeof n, "%s.1.bias", prefix);
    h->bn_b = layer_param(pl, n, 1, SHAPE(out));
    snprintf(n, sizeof n, "%s.1.running_mean", prefix);
    h->bn_mean = layer_param(pl, n, 1, SHAPE(out));
    tensor_set_requires_grad(h->bn_mean, 0);
    snprintf(n, sizeof n, "%s.1.running_var", prefix);
    h->bn_var = layer_param(pl, n, 1, SHAPE(out));
    init_ones(h->bn_var->data, out);
    tensor_set_requires_grad(h->bn_var, 0);
}

tensor *fusion_head_forward(const fusion_head *h, const nn_ctx *ctx, tensor *const *branches, int n) {
    tensor *parts[8];
    if (n < 1 || n > 8) {
        er_fail(ER_INPUT, "fusion head: %d branches (1..8)", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) parts[i] = op_l2_normalize(branches[i], -1, 1e-12f); /* F.normalize */
    tensor *x = n == 1 ? parts[0] : op_concat(n, parts, 1);
    if (x && x->shape[1] != h->in) {
        er_fail(ER_INPUT, "fusion head: %lld input features, built for %d", (long long)x->shape[1], h->in);
        return NULL;
    }
    int training = ctx && ctx->training;
    x = ac_linear(ctx, x, h->w, h->b);
    /* BatchNorm1d; under mpirun its batch statistics are the global batch's (sync_batchnorm.h) */
    int64_t N = x ? x->shape[0] : 0, C = x ? x->shape[1] : 0;
    x = sync_batchnorm2d(op_reshape(x, 4, SHAPE(N, C, 1, 1)), h->bn_w, h->bn_b, h->bn_mean, h->bn_var, training, 0.1f,
                         1e-5f, 0);
    x = op_reshape(x, 2, SHAPE(N, C));
    return op_l2_normalize(op_gelu(x), -1, 1e-12f);
}
