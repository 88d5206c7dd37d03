/* prenorm_layer.c — the pre-norm self/cross-attention layer of EndoFinder-Scene (prenorm_layer.h). */
#include "nn/layers/prenorm_layer.h"

#include <stdio.h>
#include <string.h>

#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"

static tensor *weight(param_list *pl, const char *prefix, const char *name, int64_t out, int64_t in, uint64_t seed,
                      uint32_t family) {
    char full[200];
    snprintf(full, sizeof full, "%s.%s.weight", prefix, name);
    tensor *w = layer_param(pl, full, 2, SHAPE(out, in));
    rng_t r = layer_param_rng(seed, pl, family);
    init_xavier_uniform(w->data, out * in, in, out, 1.0f, &r);
    return w;
}

static tensor *bias(param_list *pl, const char *prefix, const char *name, int64_t n) {
    char full[200];
    snprintf(full, sizeof full, "%s.%s.bias", prefix, name);
    tensor *b = layer_param(pl, full, 1, SHAPE(n));
    init_zeros(b->data, n);
    return b;
}

static void norm(param_list *pl, const char *prefix, const char *name, int dim, tensor **w, tensor **b) {
    char full[200];
    snprintf(full, sizeof full, "%s.%s.weight", prefix, name);
    *w = layer_param(pl, full, 1, SHAPE(dim));
    init_ones((*w)->data, dim);
    *b = bias(pl, prefix, name, dim);
}

void prenorm_layer_init(prenorm_layer *l, const char *prefix, int dim, int heads, int dim_head, int mlp, int kv_dim,
                        float eps, uint64_t seed, uint32_t family, param_list *pl) {
    memset(l, 0, sizeof *l);
    l->dim = dim; l->heads = heads; l->dim_head = dim_head; l->mlp = mlp; l->kv_dim = kv_dim; l->eps = eps;
    int64_t inner = (int64_t)heads * dim_head;
    char p0[180], p1[180];
    snprintf(p0, sizeof p0, "%s.0", prefix);
    snprintf(p1, sizeof p1, "%s.1", prefix);
    norm(pl, p0, "norm", dim, &l->n1_w, &l->n1_b);
    if (kv_dim > 0) {
        l->q_w = weight(pl, p0, "fn.to_q", inner, dim, seed, family);
        l->kv_w = weight(pl, p0, "fn.to_kv", 2 * inner, kv_dim, seed, family);
    } else {
        l->qkv_w = weight(pl, p0, "fn.to_qkv", 3 * inner, dim, seed, family);
    }
    l->out_w = weight(pl, p0, "fn.to_out.0", dim, inner, seed, family);
    l->out_b = bias(pl, p0, "fn.to_out.0", dim);
    norm(pl, p1, "norm", dim, &l->n2_w, &l->n2_b);
    l->fc1_w = weight(pl, p1, "fn.net.0", mlp, dim, seed, family);
    l->fc1_b = bias(pl, p1, "fn.net.0", mlp);
    l->fc2_w = weight(pl, p1, "fn.net.3", dim, mlp, seed, family);
    l->fc2_b = bias(pl, p1, "fn.net.3", dim);
}

double prenorm_layer_param_count(int dim, int heads, int dim_head, int mlp, int kv_dim) {
    double inner = (double)heads * dim_head;
    double attn = kv_dim > 0 ? inner * dim + 2 * inner * kv_dim : 3 * inner * dim;
    return 4.0 * dim + attn + inner * dim + dim + (double)mlp * dim + mlp + (double)dim * mlp + dim;
}

/* [B, T, n * H * Dh] -> n views [B, H, T, Dh] (unit stride on Dh, as op_attention wants). */
static void split_heads(tensor *t, int n, int H, int Dh, tensor **out) {
    if (!t) { for (int i = 0; i < n; i++) out[i] = NULL; return; }
    int64_t B = t->shape[0], T = t->shape[1];
    tensor *r = op_reshape(t, 5, SHAPE(B, T, n, H, Dh));
    r = op_permute(r, (const int[]){2, 0, 3, 1, 4}); /* [n, B, H, T, Dh] */
    for (int i = 0; i < n; i++) out[i] = op_squeeze(op_slice(r, 0, i, i + 1), 0);
}

tensor *prenorm_layer_forward(const prenorm_layer *l, const nn_ctx *ctx, tensor *x, tensor *z) {
    /* ctx: the autocast scope (nn/layers/autocast.h); dropout 0 in the reference */
    if (!x || (l->kv_dim > 0 && !z)) return NULL;
    int64_t B = x->shape[0], T = x->shape[1];
    int H = l->heads, Dh = l->dim_head;
    tensor *h = ac_layernorm(ctx, x, l->n1_w, l->n1_b, l->eps);
    tensor *qkv[3];
    if (l->kv_dim > 0) {
        split_heads(ac_linear_act(ctx, h, l->q_w, NULL), 1, H, Dh, &qkv[0]);
        split_heads(ac_linear_act(ctx, z, l->kv_w, NULL), 2, H, Dh, &qkv[1]);
    } else {
        split_heads(ac_linear_act(ctx, h, l->qkv_w, NULL), 3, H, Dh, qkv);
    }
    tensor *a = ac_attention(ctx, qkv[0], qkv[1], qkv[2]); /* scale Dh^-0.5 */
    a = op_reshape(op_permute(a, (const int[]){0, 2, 1, 3}), 3, SHAPE(B, T, (int64_t)H * Dh));
    x = ac_linear_add(ctx, a, l->out_w, l->out_b, x);
    h = ac_layernorm(ctx, x, l->n2_w, l->n2_b, l->eps);
    h = l->fc1_b ? op_bias_gelu(ac_linear_act(ctx, h, l->fc1_w, NULL), l->fc1_b) : op_gelu(ac_linear(ctx, h, l->fc1_w, NULL));
    return ac_linear_add(ctx, h, l->fc2_w, l->fc2_b, x);
}
