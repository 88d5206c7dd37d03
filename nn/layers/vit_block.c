/* vit_block.c — the pre-norm transformer block of the ViT encoder and the MAE decoder. */
#include "nn/layers/vit_block.h"

#include <stdio.h>
#include <string.h>

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/layers/lora.h"
#include "nn/layers/swiglu.h"
#include "nn/ops.h"

/* "<prefix>.<name>.weight" [out, in] xavier-uniform and (bias) "<prefix>.<name>.bias" zeros. */
static void linear(tensor **w, tensor **b, param_list *pl, const char *prefix, const char *name, int64_t out,
                   int64_t in, int bias, uint64_t seed) {
    char full[200];
    snprintf(full, sizeof full, "%s.%s.weight", prefix, name);
    *w = layer_param(pl, full, 2, SHAPE(out, in));
    if (bias) {
        snprintf(full, sizeof full, "%s.%s.bias", prefix, name);
        *b = layer_param(pl, full, 1, SHAPE(out));
    }
    rng_t r = layer_param_rng(seed, pl, 0);
    init_xavier_uniform((*w)->data, out * in, in, out, 1.0f, &r);
    if (bias) init_zeros((*b)->data, out);
}

/* LayerNorm "<prefix>.<name>.weight" ones and ".bias" zeros. */
static void norm(tensor **w, tensor **b, param_list *pl, const char *prefix, const char *name, int dim) {
    char full[200];
    snprintf(full, sizeof full, "%s.%s.weight", prefix, name);
    *w = layer_param(pl, full, 1, SHAPE(dim));
    init_ones((*w)->data, dim);
    snprintf(full, sizeof full, "%s.%s.bias", prefix, name);
    *b = layer_param(pl, full, 1, SHAPE(dim));
}

/* LayerScale "<prefix>.<name>.gamma" = ls_init, or none when ls_init <= 0. */
static tensor *layerscale(param_list *pl, const char *prefix, const char *name, int dim, double ls_init) {
    if (ls_init <= 0) return NULL;
    char full[200];
    snprintf(full, sizeof full, "%s.%s.gamma", prefix, name);
    tensor *t = layer_param(pl, full, 1, SHAPE(dim));
    init_constant(t->data, dim, (float)ls_init);
    return t;
}

void vit_block_init(vit_block *b, const char *prefix, int dim, double mlp_ratio, int qkv_bias,
                    double ls_init, uint64_t seed, param_list *pl) {
    vit_block_init_mlp(b, prefix, dim, (int64_t)(dim * mlp_ratio), 0, qkv_bias, ls_init, seed, pl);
}

void vit_block_init_mlp(vit_block *b, const char *prefix, int dim, int64_t hid, int swiglu, int qkv_bias,
                        double ls_init, uint64_t seed, param_list *pl) {
    memset(b, 0, sizeof *b);
    b->swiglu = swiglu != 0;
    norm(&b->norm1_w, &b->norm1_b, pl, prefix, "norm1", dim);
    linear(&b->qkv_w, &b->qkv_b, pl, prefix, "attn.qkv", 3 * (int64_t)dim, dim, qkv_bias, seed);
    linear(&b->proj_w, &b->proj_b, pl, prefix, "attn.proj", dim, dim, 1, seed);
    b->ls1 = layerscale(pl, prefix, "ls1", dim, ls_init);
    norm(&b->norm2_w, &b->norm2_b, pl, prefix, "norm2", dim);
    linear(&b->fc1_w, &b->fc1_b, pl, prefix, "mlp.fc1", b->swiglu ? 2 * hid : hid, dim, 1, seed);
    linear(&b->fc2_w, &b->fc2_b, pl, prefix, "mlp.fc2", dim, hid, 1, seed);
    b->ls2 = layerscale(pl, prefix, "ls2", dim, ls_init);
}

tensor *vit_block_forward(const vit_block *b, const nn_ctx *ctx, tensor *x, int heads, float eps) {
    /* ctx: the autocast scope (nn/layers/autocast.h: under bf16, everything between the two
     * layernorms and the residual adds is bf16, the residual stream x fp32) and the optional LoRA
     * adapters' dropout (no dropout / drop-path in the block) */
    if (!x) return NULL;
    int64_t B = x->shape[0], T = x->shape[1], D = x->shape[2], Dh = D / heads;
    tensor *h = ac_layernorm(ctx, x, b->norm1_w, b->norm1_b, eps);
    tensor *qkv = b->lora[VIT_LORA_QKV] ? ac_act(ctx, lora_linear(b->lora[VIT_LORA_QKV], ctx, h, b->qkv_w, b->qkv_b))
                                        : ac_linear_act(ctx, h, b->qkv_w, b->qkv_b); /* [B,T,3D] */
    qkv = op_reshape(qkv, 5, SHAPE(B, T, 3, heads, Dh));
    qkv = op_permute(qkv, (const int[]){2, 0, 3, 1, 4});                /* [3,B,H,T,Dh] */
    tensor *q = op_squeeze(op_slice(qkv, 0, 0, 1), 0);
    tensor *k = op_squeeze(op_slice(qkv, 0, 1, 2), 0);
    tensor *v = op_squeeze(op_slice(qkv, 0, 2, 3), 0);
    tensor *a = ac_attention(ctx, q, k, v);                             /* [B,H,T,Dh] */
    a = op_reshape(op_permute(a, (const int[]){0, 2, 1, 3}), 3, SHAPE(B, T, D));
    if (!b->lora[VIT_LORA_PROJ] && !b->ls1) { /* the residual add rides in the product's epilogue */
        x = ac_linear_add(ctx, a, b->proj_w, b->proj_b, x);
    } else {
        a = lora_linear(b->lora[VIT_LORA_PROJ], ctx, a, b->proj_w, b->proj_b); /* fp32 (lora.h) */
        if (b->ls1) a = op_mul(a, b->ls1);
        x = op_add(x, a);
    }
    h = ac_layernorm(ctx, x, b->norm2_w, b->norm2_b, eps);
    if (!b->swiglu && !b->lora[VIT_LORA_FC1] && b->fc1_b) { /* bias and GELU in one pass, same bits */
        h = op_bias_gelu(ac_linear_act(ctx, h, b->fc1_w, NULL), b->fc1_b);
    } else {
        h = lora_linear(b->lora[VIT_LORA_FC1], ctx, h, b->fc1_w, b->fc1_b);
        h = b->swiglu ? swiglu_gate(h) : op_gelu(h);
    }
    if (!b->lora[VIT_LORA_FC2] && !b->ls2) return ac_linear_add(ctx, h, b->fc2_w, b->fc2_b, x);
    h = lora_linear(b->lora[VIT_LORA_FC2], ctx, h, b->fc2_w, b->fc2_b);
    if (b->ls2) h = op_mul(h, b->ls2);
    return op_add(x, h);
}

/* With a tape every block's intermediates stay for the backward. Without one (inference) they are
 * dead once the block's output exists, but the arena frees only at the step's end (nn/arena.h): a
 * ViT-L forward at batch 128 on 197 tokens held ~25 GB of them. So each block runs above an arena
 * mark, its output is copied into one of two [B,T,D] buffers taken before the loop, and the arena
 * is released back to the mark: a forward holds one block's activations. Same values either way. */
tensor *vit_blocks_forward(const vit_block *blocks, int n, const nn_ctx *ctx, tensor *x, int heads, float eps) {
    if (!x || n <= 0) return x;
    if (grad_enabled()) {
        for (int i = 0; i < n; i++) x = vit_block_forward(&blocks[i], ctx, x, heads, eps);
        return x;
    }
    arena *a = arena_default(x->device);
    tensor *buf[2] = {tensor_empty_dt(x->device, x->dtype, x->ndim, x->shape),
                      tensor_empty_dt(x->device, x->dtype, x->ndim, x->shape)};
    for (int i = 0; i < n && x; i++) {
        arena_mark m = arena_get_mark(a);
        x = tensor_keep_released(vit_block_forward(&blocks[i], ctx, x, heads, eps), buf[i & 1], m);
    }
    return x;
}
