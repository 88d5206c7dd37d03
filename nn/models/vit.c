/* vit.c — Vision Transformer (timm layout) on endoret's ops: build, forward, pos-embed resampling
 * (weights files: vit_io.c). */
#include "nn/models/vit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/layers/layer_params.h"
#include "nn/layers/lora.h"
#include "nn/models/pos_interp.h"
#include "nn/ops.h"
#include "nn/base/rng.h"

/* ---------------------------------------------------------------- configs */

int vit_config_preset(const char *name, vit_config *c) {
    memset(c, 0, sizeof *c);
    c->img = 224; c->patch = 16; c->in_chans = 3; c->mlp_ratio = 4; c->qkv_bias = 1;
    c->pos_prefix = 1; c->pos_fixed = 1; c->eps = 1e-6;
    char base[64];
    snprintf(base, sizeof base, "%s", name ? name : "");
    char *suf = strstr(base, "_patch");
    if (suf) {
        char *end;
        long p = strtol(suf + 6, &end, 10);
        if (*end || p < 1 || p > 64) return er_fail(ER_INPUT, "model '%s': bad patch suffix", name);
        c->patch = (int)p;
        *suf = 0;
    }
    if (!strcmp(base, "vit_tiny")) { c->dim = 192; c->depth = 12; c->heads = 3; }
    else if (!strcmp(base, "vit_small")) { c->dim = 384; c->depth = 12; c->heads = 6; }
    else if (!strcmp(base, "vit_base")) { c->dim = 768; c->depth = 12; c->heads = 12; }
    else if (!strcmp(base, "vit_large")) { c->dim = 1024; c->depth = 24; c->heads = 16; }
    else if (!strcmp(base, "vit_giant")) { /* DINOv2 vit_giant2 + SwiGLUFFNFused: int(2/3 * 4 * 1536) -> x8 = 4096 */
        c->dim = 1536; c->depth = 40; c->heads = 24; c->swiglu = 1; c->mlp_hidden = ((int)(2.0 / 3.0 * 4 * 1536) + 7) / 8 * 8;
        c->mlp_ratio = (double)c->mlp_hidden / c->dim; /* what the memory estimate reads */
    }
    else return er_fail(ER_INPUT, "unknown model '%s' (vit_tiny, vit_small, vit_base, vit_large, vit_giant, optional _patch14/_patch16)", name ? name : "");
    return ER_OK;
}

int vit_config_check(const vit_config *c) {
    if (c->patch < 1) return er_fail(ER_INPUT, "vit: model.patch must be >= 1");
    if (c->img < c->patch || c->img % c->patch) return er_fail(ER_INPUT, "vit: model.img = %d is not a multiple of model.patch = %d", c->img, c->patch);
    if (c->in_chans < 1) return er_fail(ER_INPUT, "vit: in_chans must be >= 1");
    if (c->dim < 4 || c->heads < 1 || c->dim % c->heads) return er_fail(ER_INPUT, "vit: model.dim = %d is not divisible by model.heads = %d", c->dim, c->heads);
    if (c->depth < 0) return er_fail(ER_INPUT, "vit: model.depth must be >= 0");
    if (c->pos_fixed && c->dim % 4) return er_fail(ER_INPUT, "vit: fixed sin-cos pos-embed needs model.dim %% 4 == 0 (model.dim = %d)", c->dim);
    if (c->mlp_ratio <= 0) return er_fail(ER_INPUT, "vit: mlp_ratio must be > 0");
    if (c->registers < 0 || c->pos_prefix < 0 || c->pos_prefix > 1 + c->registers) return er_fail(ER_INPUT, "vit: bad registers/pos_prefix");
    if (c->eps <= 0) return er_fail(ER_INPUT, "vit: eps must be > 0");
    if (c->mlp_hidden < 0 || c->swiglu < 0 || c->swiglu > 1) return er_fail(ER_INPUT, "vit: bad mlp_hidden/swiglu");
    if (c->pos_interp < 0 || c->pos_interp >= POS_INTERP_COUNT) return er_fail(ER_INPUT, "vit: bad pos_interp %d", c->pos_interp);
    return ER_OK;
}

/* ---------------------------------------------------------------- parameters */

static void fill_sincos(vit *v) {
    int P = v->cfg.pos_prefix, D = v->cfg.dim;
    /* MAE layout: the [CLS] row (when present) is zero; registers with a position too */
    float *buf = xcalloc((size_t)(P + v->L) * D, sizeof(float));
    init_sincos_pos_embed_2d(buf + (size_t)P * D, D, v->grid, v->grid, 0);
    tensor_copy_from_host(v->pos_embed, buf);
    free(buf);
}

vit *vit_new(const vit_config *cfg, uint64_t seed) {
    if (vit_config_check(cfg)) return NULL;
    vit *v = xcalloc(1, sizeof *v);
    v->cfg = *cfg;
    v->grid = cfg->img / cfg->patch;
    v->L = v->grid * v->grid;
    int D = cfg->dim, p = cfg->patch;
    param_list *pl = &v->params;
    v->cls_token = layer_param(pl, "cls_token", 3, SHAPE(1, 1, D));
    { rng_t r = layer_param_rng(seed, pl, 0); init_normal(v->cls_token->data, D, 0, 0.02f, &r); }
    if (cfg->registers > 0) {
        v->reg_token = layer_param(pl, "reg_token", 3, SHAPE(1, cfg->registers, D));
        rng_t r = layer_param_rng(seed, pl, 0);
        init_normal(v->reg_token->data, (int64_t)cfg->registers * D, 0, 0.02f, &r);
    }
    v->pos_embed = layer_param(pl, "pos_embed", 3, SHAPE(1, cfg->pos_prefix + v->L, D));
    if (cfg->pos_fixed) {
        fill_sincos(v);
        tensor_set_requires_grad(v->pos_embed, 0);
    } else {
        rng_t r = layer_param_rng(seed, pl, 0);
        init_trunc_normal(v->pos_embed->data, tensor_numel(v->pos_embed), 0, 0.02f, -2, 2, &r);
    }
    v->patch_w = layer_param(pl, "patch_embed.proj.weight", 4, SHAPE(D, cfg->in_chans, p, p));
    v->patch_b = layer_param(pl, "patch_embed.proj.bias", 1, SHAPE(D));
    {
        rng_t r = layer_param_rng(seed, pl, 0);
        init_xavier_uniform(v->patch_w->data, tensor_numel(v->patch_w), (int64_t)cfg->in_chans * p * p, D, 1.0f, &r);
    }
    v->blocks = xcalloc(cfg->depth ? cfg->depth : 1, sizeof(vit_block));
    for (int i = 0; i < cfg->depth; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "blocks.%d", i);
        vit_block_init_mlp(&v->blocks[i], prefix, D, vit_mlp_hidden(cfg), cfg->swiglu, cfg->qkv_bias, cfg->layerscale,
                           seed, pl);
    }
    v->norm_w = layer_param(pl, "norm.weight", 1, SHAPE(D));
    init_ones(v->norm_w->data, D);
    v->norm_b = layer_param(pl, "norm.bias", 1, SHAPE(D));
    return v;
}

vit *vit_new_on(int device, const vit_config *cfg, uint64_t seed) {
    vit *v = vit_new(cfg, seed);
    if (v && params_to_device(&v->params, device)) {
        vit_free(v);
        return NULL;
    }
    return v;
}

void vit_free(vit *v) {
    if (!v) return;
    params_free(&v->params);
    free(v->blocks);
    free(v->loras);
    free(v);
}

/* ---------------------------------------------------------------- forward */

void vit_patchify(const float *img, int B, int C, int H, int W, int p, float *out) {
    int gh = H / p, gw = W / p;
    size_t pd = (size_t)C * p * p;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++) {
                float *dst = out + ((size_t)b * gh * gw + (size_t)gy * gw + gx) * pd;
                for (int c = 0; c < C; c++)
                    for (int dy = 0; dy < p; dy++) {
                        const float *src = img + (((size_t)b * C + c) * H + (size_t)gy * p + dy) * W + (size_t)gx * p;
                        memcpy(dst + ((size_t)c * p + dy) * p, src, p * sizeof(float));
                    }
            }
}

/* Image tensor [B,C,H,W] -> patches [B,L,C*p*p] with view ops on the image's device: the reshape
 * to [B,C,g,p,g,p] is free, the permute to (b, gy, gx, c, dy, dx) is one strided copy. */
static tensor *patchify_op(tensor *img, int p) {
    int64_t B = img->shape[0], C = img->shape[1], gh = img->shape[2] / p, gw = img->shape[3] / p;
    tensor *x = op_reshape(img, 6, SHAPE(B, C, gh, p, gw, p));
    x = op_permute(x, (const int[]){0, 2, 4, 1, 3, 5});
    return op_reshape(op_contiguous(x), 3, SHAPE(B, gh * gw, C * p * p));
}

/* Everything after the patches: embedding, positions, keep-gather, prefix tokens, blocks, norm. */
static tensor *forward_patches(vit *v, const nn_ctx *ctx, tensor *patches, int B, const int32_t *keep, int K) {
    const vit_config *c = &v->cfg;
    int D = c->dim, L = v->L, P = c->pos_prefix, R = c->registers;
    int64_t pd = (int64_t)c->in_chans * c->patch * c->patch;
    tensor *w = op_reshape(v->patch_w, 2, SHAPE(D, pd));
    tensor *x = lora_linear(v->patch_lora, ctx, patches, w, v->patch_b);        /* [B,L,D] */
    x = op_add(x, op_slice(v->pos_embed, 1, P, P + L));
    if (keep) x = op_gather(x, 1, keep, K);                                    /* [B,K,D] */
    int dev = v->patch_w->device;
    tensor *zeros = tensor_zeros(dev, 3, SHAPE(B, 1, D));
    tensor *cls = op_add(zeros, v->cls_token);                                 /* [B,1,D] */
    if (P >= 1) cls = op_add(cls, op_slice(v->pos_embed, 1, 0, 1));
    tensor *parts[3];
    int np = 0;
    parts[np++] = cls;
    if (R > 0) {
        tensor *reg = op_add(tensor_zeros(dev, 3, SHAPE(B, R, D)), v->reg_token);
        if (P > 1) reg = op_add(reg, op_slice(v->pos_embed, 1, 1, P));
        parts[np++] = reg;
    }
    parts[np++] = x;
    x = op_concat(np, parts, 1);
    x = vit_blocks_forward(v->blocks, c->depth, ctx, x, c->heads, (float)c->eps);
    return op_layernorm(x, v->norm_w, v->norm_b, (float)c->eps);
}

tensor *vit_forward_t(vit *v, const nn_ctx *ctx, tensor *img, const int32_t *keep, int K) {
    if (!img) return NULL;
    const vit_config *c = &v->cfg;
    if (img->ndim != 4 || img->shape[1] != c->in_chans || img->shape[2] != c->img || img->shape[3] != c->img) {
        char b[96];
        er_fail(ER_INPUT, "vit: image tensor %s, expected [B, %d, %d, %d]", tensor_shape_str(img, b, sizeof b),
                c->in_chans, c->img, c->img);
        return NULL;
    }
    if (img->device != v->patch_w->device) {
        er_fail(ER_INPUT, "vit: image on %s, model on %s", img->device ? "cuda" : "cpu", v->patch_w->device ? "cuda" : "cpu");
        return NULL;
    }
    return forward_patches(v, ctx, patchify_op(img, c->patch), (int)img->shape[0], keep, K);
}

tensor *vit_forward(vit *v, const nn_ctx *ctx, const float *img, int B, const int32_t *keep, int K) {
    const vit_config *c = &v->cfg;
    int dev = v->patch_w->device;
    if (dev != DEV_CPU) /* one upload of the images; patchify runs on the device */
        return vit_forward_t(v, ctx, tensor_upload(dev, 4, SHAPE(B, c->in_chans, c->img, c->img), img), keep, K);
    /* CPU: patches go straight into an arena tensor (no grad is needed for the input) */
    int64_t pd = (int64_t)c->in_chans * c->patch * c->patch;
    tensor *patches = tensor_empty(DEV_CPU, 3, SHAPE(B, v->L, pd));
    if (!patches) return NULL;
    vit_patchify(img, B, c->in_chans, c->img, c->img, c->patch, patches->data);
    return forward_patches(v, ctx, patches, B, keep, K);
}

tensor *vit_cls(vit *v, const nn_ctx *ctx, const float *img, int B) {
    tensor *x = vit_forward(v, ctx, img, B, NULL, 0);
    return op_reshape(op_slice(x, 1, 0, 1), 2, SHAPE(B, v->cfg.dim));
}

int64_t vit_mlp_hidden(const vit_config *c) { return c->mlp_hidden > 0 ? c->mlp_hidden : (int64_t)(c->dim * c->mlp_ratio); }

double vit_forward_flops(const vit_config *c, int B, int T) {
    double D = c->dim, hid = (double)vit_mlp_hidden(c), L = T - 1 - c->registers;
    double patch = 2.0 * L * c->in_chans * c->patch * c->patch * D;
    double per_block = 2.0 * T * D * 3 * D      /* qkv */
                     + 2.0 * 2 * (double)T * T * D /* q k^T and attn v */
                     + 2.0 * T * D * D          /* proj */
                     + 2.0 * (c->swiglu ? 3 : 2) * T * D * hid; /* fc1 (2H rows with SwiGLU) + fc2 */
    return B * (patch + c->depth * per_block);
}

/* ---------------------------------------------------------------- pos-embed resampling */

int vit_set_img(vit *v, int img) {
    if (img == v->cfg.img) return ER_OK;
    vit_config c = v->cfg;
    c.img = img;
    if (vit_config_check(&c)) return ER_INPUT;
    int gnew = img / c.patch, P = c.pos_prefix, D = c.dim;
    int Lnew = gnew * gnew;
    float *old = xmalloc(tensor_numel(v->pos_embed) * sizeof(float));
    tensor_to_host(v->pos_embed, old);
    float *nw = xcalloc((size_t)(P + Lnew) * D, sizeof(float));
    memcpy(nw, old, (size_t)P * D * sizeof(float));
    if (c.pos_fixed) init_sincos_pos_embed_2d(nw + (size_t)P * D, D, gnew, gnew, 0);
    else pos_interp_grid(c.pos_interp, old + (size_t)P * D, v->grid, nw + (size_t)P * D, gnew, D);
    int requires = (v->pos_embed->flags & T_REQUIRES_GRAD) != 0;
    tensor *t = tensor_param_on(v->pos_embed->device, "pos_embed", 3, SHAPE(1, P + Lnew, D));
    tensor_copy_from_host(t, nw);
    if (!requires) tensor_set_requires_grad(t, 0);
    for (int i = 0; i < v->params.n; i++)
        if (v->params.t[i] == v->pos_embed) v->params.t[i] = t;
    tensor_free(v->pos_embed);
    v->pos_embed = t;
    v->cfg = c;
    v->grid = gnew;
    v->L = Lnew;
    free(old);
    free(nw);
    return ER_OK;
}
