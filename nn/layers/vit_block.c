/* vit_block.c — the pre-norm transformer block of the ViT encoder and the MAE decoder. */
#include "nn/layers/vit_block.h"

#include <stdio.h>
#include <string.h>

#include "nn/init.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"

static void init_linear(tensor *w, tensor *b, uint64_t seed, const param_list *pl) {
    rng_t r = layer_param_rng(seed, pl, 0);
    init_xavier_uniform(w->data, tensor_numel(w), w->shape[1], w->shape[0], 1.0f, &r);
    if (b) init_zeros(b->data, tensor_numel(b));
}

void vit_block_init(vit_block *b, const char *prefix, int dim, double mlp_ratio, int qkv_bias,
                    double ls_init, uint64_t seed, param_list *pl) {
    memset(b, 0, sizeof *b);
    int64_t hid = (int64_t)(dim * mlp_ratio);
    char p[200];
#define P(name) (snprintf(p, sizeof p, "%s.%s", prefix, name), p)
    b->norm1_w = layer_param(pl, P("norm1.weight"), 1, SHAPE(dim));
    init_ones(b->norm1_w->data, dim);
    b->norm1_b = layer_param(pl, P("norm1.bias"), 1, SHAPE(dim));
    b->qkv_w = layer_param(pl, P("attn.qkv.weight"), 2, SHAPE(3 * dim, dim));
    if (qkv_bias) b->qkv_b = layer_param(pl, P("attn.qkv.bias"), 1, SHAPE(3 * dim));
    init_linear(b->qkv_w, b->qkv_b, seed, pl);
    b->proj_w = layer_param(pl, P("attn.proj.weight"), 2, SHAPE(dim, dim));
    b->proj_b = layer_param(pl, P("attn.proj.bias"), 1, SHAPE(dim));
    init_linear(b->proj_w, b->proj_b, seed, pl);
    if (ls_init > 0) {
        b->ls1 = layer_param(pl, P("ls1.gamma"), 1, SHAPE(dim));
        init_constant(b->ls1->data, dim, (float)ls_init);
    }
    b->norm2_w = layer_param(pl, P("norm2.weight"), 1, SHAPE(dim));
    init_ones(b->norm2_w->data, dim);
    b->norm2_b = layer_param(pl, P("norm2.bias"), 1, SHAPE(dim));
    b->fc1_w = layer_param(pl, P("mlp.fc1.weight"), 2, SHAPE(hid, dim));
    b->fc1_b = layer_param(pl, P("mlp.fc1.bias"), 1, SHAPE(hid));
    init_linear(b->fc1_w, b->fc1_b, seed, pl);
    b->fc2_w = layer_param(pl, P("mlp.fc2.weight"), 2, SHAPE(dim, hid));
    b->fc2_b = layer_param(pl, P("mlp.fc2.bias"), 1, SHAPE(dim));
    init_linear(b->fc2_w, b->fc2_b, seed, pl);
    if (ls_init > 0) {
        b->ls2 = layer_param(pl, P("ls2.gamma"), 1, SHAPE(dim));
        init_constant(b->ls2->data, dim, (float)ls_init);
    }
#undef P
}

tensor *vit_block_forward(const vit_block *b, const nn_ctx *ctx, tensor *x, int heads, float eps) {
    (void)ctx; /* no dropout / drop-path in these blocks yet */
    if (!x) return NULL;
    int64_t B = x->shape[0], T = x->shape[1], D = x->shape[2], Dh = D / heads;
    tensor *h = op_layernorm(x, b->norm1_w, b->norm1_b, eps);
    tensor *qkv = op_linear(h, b->qkv_w, b->qkv_b);                       /* [B,T,3D] */
    qkv = op_reshape(qkv, 5, SHAPE(B, T, 3, heads, Dh));
    qkv = op_permute(qkv, (const int[]){2, 0, 3, 1, 4});                /* [3,B,H,T,Dh] */
    tensor *q = op_squeeze(op_slice(qkv, 0, 0, 1), 0);
    tensor *k = op_squeeze(op_slice(qkv, 0, 1, 2), 0);
    tensor *v = op_squeeze(op_slice(qkv, 0, 2, 3), 0);
    tensor *a = op_attention(q, k, v, NULL, MASK_NONE, 0.0f);           /* [B,H,T,Dh] */
    a = op_reshape(op_permute(a, (const int[]){0, 2, 1, 3}), 3, SHAPE(B, T, D));
    a = op_linear(a, b->proj_w, b->proj_b);
    if (b->ls1) a = op_mul(a, b->ls1);
    x = op_add(x, a);
    h = op_layernorm(x, b->norm2_w, b->norm2_b, eps);
    h = op_gelu(op_linear(h, b->fc1_w, b->fc1_b));
    h = op_linear(h, b->fc2_w, b->fc2_b);
    if (b->ls2) h = op_mul(h, b->ls2);
    return op_add(x, h);
}
