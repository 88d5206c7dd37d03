/* mae.h — the MAE decoder (MAE's parameter names): kept-patch latents + mask tokens -> per-patch
 * pixel predictions. The masking, target and loss it trains with are nn/losses/mae_loss.h. */
#ifndef ENDORET_MAE_H
#define ENDORET_MAE_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/losses/mae_loss.h"
#include "nn/models/vit.h"
#include "nn/tensor.h"

typedef struct {
    int dim, depth, heads, L, grid, patch_dim;
    float eps;
    tensor *embed_w, *embed_b, *mask_token, *pos_embed, *norm_w, *norm_b, *pred_w, *pred_b;
    vit_block *blocks;
} mae_decoder;

/* Decoder for encoder `enc` (width enc.dim, L patches), appending its parameters to pl:
 * decoder_embed.{weight,bias}, mask_token, decoder_pos_embed (fixed sin-cos, frozen),
 * decoder_blocks.N.*, decoder_norm.*, decoder_pred.*. ER_INPUT on a bad size. */
int mae_decoder_init(mae_decoder *d, const vit_config *enc, int dim, int depth, int heads, uint64_t seed,
                     param_list *pl);
/* The same parameters (same host Philox draws) moved to `device`. */
int mae_decoder_init_on(int device, mae_decoder *d, const vit_config *enc, int dim, int depth, int heads,
                        uint64_t seed, param_list *pl);
void mae_decoder_free(mae_decoder *d); /* frees the block array; tensors belong to the list */

/* latent: encoder output [B, 1 + R + K, De] ([CLS], R registers, kept patches in shuffle order);
 * returns pred [B, L, p*p*C] in the original patch order. */
tensor *mae_decoder_forward(const mae_decoder *d, const nn_ctx *ctx, tensor *latent, int registers, const int32_t *ids_restore);

#endif
