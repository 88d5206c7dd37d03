/* lora.c — LoRA adapters (lora.h): init, the unmerged forward, the host merge. */
#include "nn/layers/lora.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/base/rng.h"
#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"

/* init streams of this module (layer_params.h: 0-4 are the ViT, MAE decoder, SSCD head, scene) */
enum { FAMILY_LORA = 5 };

void lora_init(lora *l, const char *base, int64_t in, int64_t out, int conv_c, int conv_k, const lora_config *c,
               uint32_t id, uint64_t seed, param_list *pl) {
    memset(l, 0, sizeof *l);
    l->in = in; l->out = out; l->r = c->r; l->id = id;
    l->scale = (float)(c->alpha / c->r);
    l->dropout = (float)c->dropout;
    char name[256];
    snprintf(name, sizeof name, "%s.lora_A.weight", base);
    l->A = conv_c > 0 ? layer_param(pl, name, 4, SHAPE(c->r, conv_c, conv_k, conv_k)) : layer_param(pl, name, 2, SHAPE(c->r, in));
    /* kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound = gain sqrt(3 / fan_in) = 1 / sqrt(fan_in) */
    float bound = (float)(1.0 / sqrt((double)in));
    rng_t r = layer_param_rng(seed, pl, FAMILY_LORA);
    init_uniform(l->A->data, tensor_numel(l->A), -bound, bound, &r);
    snprintf(name, sizeof name, "%s.lora_B.weight", base);
    l->B = conv_c > 0 ? layer_param(pl, name, 4, SHAPE(out, c->r, 1, 1)) : layer_param(pl, name, 2, SHAPE(out, c->r));
    /* tensor_param starts at zero: B = 0, so the adapter starts as the identity */
}

tensor *lora_delta(const lora *l, const nn_ctx *ctx, tensor *x) {
    if (!x) return NULL;
    tensor *h = x;
    if (ctx && ctx->training && l->dropout > 0) { /* dropout is fp32-only; the product casts back */
        uint64_t stream = rng_stream(RNG_DROPOUT, (uint32_t)ctx->step, ((uint32_t)ctx->micro << 16) ^ (0x8000u + l->id));
        h = op_dropout(ac_f32(x), l->dropout, ctx->seed, stream, 1);
    }
    tensor *A = l->A->ndim == 2 ? l->A : op_reshape(l->A, 2, SHAPE(l->r, l->in));
    tensor *B = l->B->ndim == 2 ? l->B : op_reshape(l->B, 2, SHAPE(l->out, l->r));
    return op_mul_scalar(ac_linear(ctx, ac_linear_act(ctx, h, A, NULL), B, NULL), l->scale);
}

tensor *lora_linear(const lora *l, const nn_ctx *ctx, tensor *x, tensor *w, tensor *b) {
    tensor *y = ac_linear(ctx, x, w, b);
    return l ? op_add(y, lora_delta(l, ctx, x)) : y;
}

void lora_merge_host(float *W, const float *A, const float *B, int64_t out, int64_t in, int r, double s) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            double acc = 0;
            for (int k = 0; k < r; k++) acc += (double)B[o * r + k] * A[(int64_t)k * in + i];
            W[o * in + i] = (float)(W[o * in + i] + s * acc);
        }
}
