/* mae.c — the MAE decoder (MAE's parameter names). */
#include "nn/models/mae.h"

#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"

int mae_decoder_init(mae_decoder *d, const vit_config *enc, int dim, int depth, int heads, uint64_t seed,
                     param_list *pl) {
    memset(d, 0, sizeof *d);
    if (dim < 4 || dim % 4 || heads < 1 || dim % heads || depth < 0)
        return er_fail(ER_INPUT, "mae decoder: dim %d must be a multiple of 4 and of heads %d", dim, heads);
    d->dim = dim; d->depth = depth; d->heads = heads; d->eps = (float)enc->eps;
    d->grid = enc->img / enc->patch;
    d->L = d->grid * d->grid;
    d->patch_dim = enc->patch * enc->patch * enc->in_chans;
    /* MAE init: xavier-uniform linears, zero bias, N(0, 0.02) mask token, fixed sin-cos positions */
    d->embed_w = layer_param(pl, "decoder_embed.weight", 2, SHAPE(dim, enc->dim));
    d->embed_b = layer_param(pl, "decoder_embed.bias", 1, SHAPE(dim));
    { rng_t r = layer_param_rng(seed, pl, 1);
      init_xavier_uniform(d->embed_w->data, tensor_numel(d->embed_w), enc->dim, dim, 1.0f, &r); }
    d->mask_token = layer_param(pl, "mask_token", 3, SHAPE(1, 1, dim));
    { rng_t r = layer_param_rng(seed, pl, 1);
      init_normal(d->mask_token->data, dim, 0, 0.02f, &r); }
    d->pos_embed = layer_param(pl, "decoder_pos_embed", 3, SHAPE(1, 1 + d->L, dim));
    init_sincos_pos_embed_2d(d->pos_embed->data, dim, d->grid, d->grid, 1);
    tensor_set_requires_grad(d->pos_embed, 0);
    d->blocks = xcalloc(depth ? depth : 1, sizeof(vit_block));
    for (int i = 0; i < depth; i++) {
        char prefix[40];
        snprintf(prefix, sizeof prefix, "decoder_blocks.%d", i);
        vit_block_init(&d->blocks[i], prefix, dim, 4.0, 1, 0, seed ^ 0x9e3779b97f4a7c15ull, pl);
    }
    d->norm_w = layer_param(pl, "decoder_norm.weight", 1, SHAPE(dim));
    init_ones(d->norm_w->data, dim);
    d->norm_b = layer_param(pl, "decoder_norm.bias", 1, SHAPE(dim));
    d->pred_w = layer_param(pl, "decoder_pred.weight", 2, SHAPE(d->patch_dim, dim));
    d->pred_b = layer_param(pl, "decoder_pred.bias", 1, SHAPE(d->patch_dim));
    { rng_t r = layer_param_rng(seed, pl, 1);
      init_xavier_uniform(d->pred_w->data, tensor_numel(d->pred_w), dim, d->patch_dim, 1.0f, &r); }
    return ER_OK;
}

int mae_decoder_init_on(int device, mae_decoder *d, const vit_config *enc, int dim, int depth, int heads,
                        uint64_t seed, param_list *pl) {
    int first = pl->n;
    int rc = mae_decoder_init(d, enc, dim, depth, heads, seed, pl);
    for (int i = first; !rc && i < pl->n; i++) rc = tensor_to_device(pl->t[i], device);
    return rc;
}

void mae_decoder_free(mae_decoder *d) {
    free(d->blocks);
    d->blocks = NULL;
}

tensor *mae_decoder_forward(const mae_decoder *d, const nn_ctx *ctx, tensor *latent, int registers, const int32_t *ids_restore) {
    if (!latent) return NULL;
    int64_t B = latent->shape[0], T = latent->shape[1], K = T - 1 - registers, L = d->L, D = d->dim;
    tensor *x = ac_linear(ctx, latent, d->embed_w, d->embed_b);               /* [B,T,Dd] */
    tensor *cls = op_slice(x, 1, 0, 1);
    tensor *vis = op_slice(x, 1, 1 + registers, T);                      /* [B,K,Dd] */
    tensor *parts[2] = {vis, NULL};
    int np = 1;
    if (L > K) parts[np++] = op_add(tensor_zeros(x ? x->device : DEV_CPU, 3, SHAPE(B, L - K, D)), d->mask_token);
    tensor *full = np == 2 ? op_concat(2, parts, 1) : vis;                /* shuffled order */
    full = op_gather(full, 1, ids_restore, (int)L);                      /* original order */
    tensor *both[2] = {cls, full};
    x = op_concat(2, both, 1);
    x = op_add(x, d->pos_embed);
    x = vit_blocks_forward(d->blocks, d->depth, ctx, x, d->heads, d->eps);
    x = op_layernorm(x, d->norm_w, d->norm_b, d->eps);
    x = ac_linear(ctx, x, d->pred_w, d->pred_b);
    return op_slice(x, 1, 1, 1 + L);
}
