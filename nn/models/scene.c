/* scene.c — EndoFinder-Scene's scene encoder and scene-aware decoder (scene.h). */
#include "nn/models/scene.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"

/* init streams of this module (layer_params.h families 0-2 are the ViT, MAE decoder and SSCD head) */
enum { FAMILY_SCENE = 3, FAMILY_SCENE_DEC = 4 };

void scene_config_default(scene_config *c, int dim, int heads, int img, int patch) {
    memset(c, 0, sizeof *c);
    c->dim = dim;
    c->heads = heads;
    c->head_dim = heads > 0 ? dim / heads : 0;
    c->mlp = 2 * dim;
    c->dec_dim = 512; c->dec_depth = 2; c->dec_heads = 16; c->dec_head_dim = dim / 12; c->dec_mlp = 2 * dim;
    c->img = img; c->patch = patch; c->in_chans = 3;
    c->eps = 1e-5;
}

int scene_config_check(const scene_config *c) {
    if (c->dim < 1) return er_fail(ER_INPUT, "scene: image descriptor width %d", c->dim);
    if (c->heads < 1 || c->head_dim < 1) return er_fail(ER_INPUT, "scene: heads %d x head_dim %d", c->heads, c->head_dim);
    if (c->mlp < 1) return er_fail(ER_INPUT, "scene: mlp %d", c->mlp);
    if (c->dec_dim < 4 || c->dec_dim % 4) return er_fail(ER_INPUT, "scene: decoder dim %d must be a multiple of 4", c->dec_dim);
    if (c->dec_depth < 0 || c->dec_heads < 1 || c->dec_head_dim < 1 || c->dec_mlp < 1)
        return er_fail(ER_INPUT, "scene: decoder depth %d heads %d x %d mlp %d", c->dec_depth, c->dec_heads,
                       c->dec_head_dim, c->dec_mlp);
    if (c->patch < 1 || c->img < c->patch || c->img % c->patch)
        return er_fail(ER_INPUT, "scene: image side %d is not a multiple of the patch %d", c->img, c->patch);
    return ER_OK;
}

double scene_encoder_param_count(const scene_config *c) {
    return c->dim + prenorm_layer_param_count(c->dim, c->heads, c->head_dim, c->mlp, 0) + (c->base_mean ? 1 : 0);
}

double scene_train_bytes(const scene_config *c, double N, int V, double nrec, int L) {
    double pd = 3.0 * c->patch * c->patch, dd = c->dec_dim;
    double dec = 4 * nrec * L * (c->dec_depth * (8 * dd + 3.0 * c->dec_heads * c->dec_head_dim + 2.0 * c->dec_mlp) + 3 * dd + 2 * pd);
    double enc = 4 * N * (V + 1) * (8.0 * c->dim + 3.0 * c->heads * c->head_dim + 2.0 * c->mlp);
    return dec + enc;
}

double scene_decoder_param_count(const scene_config *c) {
    double pd = (double)c->patch * c->patch * c->in_chans, dd = c->dec_dim;
    return dd * c->dim + dd + dd + c->dec_depth * prenorm_layer_param_count(c->dec_dim, c->dec_heads, c->dec_head_dim,
                                                                             c->dec_mlp, c->dim) + pd * dd + pd;
}

int scene_net_init(scene_net *s, const scene_config *c, int with_decoder, uint64_t seed, param_list *pl) {
    memset(s, 0, sizeof *s);
    int rc = scene_config_check(c);
    if (rc) return rc;
    int first = pl->n;
    s->cfg = *c;
    s->grid = c->img / c->patch;
    s->L = s->grid * s->grid;
    s->patch_dim = c->patch * c->patch * c->in_chans;
    s->scene_token = layer_param(pl, "scene_token", 3, SHAPE(1, 1, c->dim));
    { rng_t r = layer_param_rng(seed, pl, FAMILY_SCENE);
      init_normal(s->scene_token->data, c->dim, 0, 0.02f, &r); }
    prenorm_layer_init(&s->enc, "scene_transform.layers.0", c->dim, c->heads, c->head_dim, c->mlp, 0, (float)c->eps,
                       seed, FAMILY_SCENE, pl);
    if (c->base_mean) { /* after the reference's tensors, so their initial values do not move */
        s->mean_gate = layer_param(pl, "scene_mean_gate", 1, SHAPE(1));
        init_zeros(s->mean_gate->data, 1);
    }
    s->n_encoder_params = pl->n - first;
    if (!with_decoder) return ER_OK;
    s->has_decoder = 1;
    int dd = c->dec_dim;
    s->embed_w = layer_param(pl, "decoder_embed.weight", 2, SHAPE(dd, c->dim));
    { rng_t r = layer_param_rng(seed, pl, FAMILY_SCENE_DEC);
      init_xavier_uniform(s->embed_w->data, tensor_numel(s->embed_w), c->dim, dd, 1.0f, &r); }
    s->embed_b = layer_param(pl, "decoder_embed.bias", 1, SHAPE(dd));
    init_zeros(s->embed_b->data, dd);
    s->mask_token = layer_param(pl, "mask_token", 3, SHAPE(1, 1, dd));
    { rng_t r = layer_param_rng(seed, pl, FAMILY_SCENE_DEC);
      init_normal(s->mask_token->data, dd, 0, 0.02f, &r); }
    s->pos_embed = layer_param(pl, "decoder_pos_embed", 3, SHAPE(1, 1 + s->L, dd));
    init_sincos_pos_embed_2d(s->pos_embed->data, dd, s->grid, s->grid, 1);
    tensor_set_requires_grad(s->pos_embed, 0);
    s->dec = xcalloc(c->dec_depth ? c->dec_depth : 1, sizeof(prenorm_layer));
    for (int i = 0; i < c->dec_depth; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "decoder_transformer.layers.%d", i);
        prenorm_layer_init(&s->dec[i], prefix, dd, c->dec_heads, c->dec_head_dim, c->dec_mlp, c->dim, (float)c->eps,
                           seed, FAMILY_SCENE_DEC, pl);
    }
    s->pred_w = layer_param(pl, "decoder_pred.weight", 2, SHAPE(s->patch_dim, dd));
    { rng_t r = layer_param_rng(seed, pl, FAMILY_SCENE_DEC);
      init_xavier_uniform(s->pred_w->data, tensor_numel(s->pred_w), dd, s->patch_dim, 1.0f, &r); }
    s->pred_b = layer_param(pl, "decoder_pred.bias", 1, SHAPE(s->patch_dim));
    init_zeros(s->pred_b->data, s->patch_dim);
    return ER_OK;
}

void scene_net_free(scene_net *s) {
    free(s->dec);
    s->dec = NULL;
}

tensor *scene_net_encode(const scene_net *s, const nn_ctx *ctx, tensor *views) {
    if (!views) return NULL;
    if (views->ndim != 3 || views->shape[2] != s->cfg.dim) {
        char b[64];
        er_fail(ER_INPUT, "scene encoder: views %s, expected [S, V, %d]", tensor_shape_str(views, b, sizeof b), s->cfg.dim);
        return NULL;
    }
    int64_t S = views->shape[0];
    tensor *tok = op_expand(s->scene_token, 3, SHAPE(S, 1, s->cfg.dim));
    tensor *parts[2] = {tok, views};
    tensor *x = op_concat(2, parts, 1);                                   /* [S, 1 + V, dim] */
    x = prenorm_layer_forward(&s->enc, ctx, x, NULL);
    x = op_reshape(op_slice(x, 1, 0, 1), 2, SHAPE(S, s->cfg.dim));
    if (s->mean_gate) { /* averaging, plus as much of the token as training has found worth */
        tensor *mean = op_mean(op_l2_normalize(views, -1, 1e-12f), 1, 0);              /* [S, dim] */
        x = op_add(mean, op_mul(op_l2_normalize(x, -1, 1e-12f), s->mean_gate));
    }
    return op_l2_normalize(x, -1, 1e-12f);
}

tensor *scene_net_decode(const scene_net *s, const nn_ctx *ctx, tensor *z, tensor *latent, int registers,
                         const int32_t *ids_restore) {
    if (!z || !latent) return NULL;
    if (!s->has_decoder) { er_fail(ER_INPUT, "scene model built without its decoder"); return NULL; }
    int64_t N = latent->shape[0], T = latent->shape[1], K = T - 1 - registers, L = s->L, D = s->cfg.dec_dim;
    tensor *y = ac_linear(ctx, latent, s->embed_w, s->embed_b);              /* [N, T, Dd] */
    tensor *vis = op_slice(y, 1, 1 + registers, T);                       /* kept patches, shuffle order */
    tensor *full = vis;
    if (L > K) {
        tensor *parts[2] = {vis, op_add(tensor_zeros(y ? y->device : DEV_CPU, 3, SHAPE(N, L - K, D)), s->mask_token)};
        full = op_concat(2, parts, 1);
    }
    full = op_gather(full, 1, ids_restore, (int)L);                      /* original patch order */
    full = op_add(full, op_slice(s->pos_embed, 1, 1, 1 + L));            /* [CLS] row dropped */
    tensor *kv = op_unsqueeze(z, 1);                                     /* [N, 1, dim] */
    for (int i = 0; i < s->cfg.dec_depth; i++) full = prenorm_layer_forward(&s->dec[i], ctx, full, kv);
    return ac_linear(ctx, full, s->pred_w, s->pred_b);
}
