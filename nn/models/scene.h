/* scene.h — EndoFinder-Scene's trainable parts (spec endofinder_sscd_mae.md 2.2; EFS models/model.py):
 * the scene encoder that fuses the [CLS] outputs of a polyp's views into one scene descriptor, and
 * the scene-aware decoder that reconstructs a held-out view's masked patches from that descriptor.
 *
 *   scene encoder : [scene_token, cls_1 .. cls_V] (cls = the frozen image encoder's [CLS] after its
 *                   final norm, not normalised) -> one pre-norm self-attention layer
 *                   (nn/layers/prenorm_layer.h; no view position embedding, so the result does not
 *                   depend on the order of the views; no final norm) -> token 0, L2-normalised.
 *                   With base_mean (not the reference's; model.scene_base = mean):
 *                   L2(mean_v L2(cls_v) + gate * L2(token 0)), gate a learned scalar starting at 0.
 *   decoder       : the held-out view's masked encoder output -> decoder_embed -> mask tokens
 *                   inserted, unshuffled to the L positions, + fixed sin-cos decoder_pos_embed
 *                   ([CLS] dropped) -> dec_depth cross-attention layers (queries: the L tokens;
 *                   keys/values: the scene descriptor as one token) -> decoder_pred -> [N, L, p*p*3].
 * With one key/value token the softmax is 1: every position receives the same W_o W_v z; the reference
 * does exactly this, and the layer accepts several kv tokens for experiments.
 *
 * Tensor names are the reference's (scene_token, scene_transform.layers.0.*, decoder_embed.*,
 * mask_token, decoder_pos_embed, decoder_transformer.layers.N.*, decoder_pred.*), so its state dict
 * saved as safetensors loads unchanged. */
#ifndef ENDORET_SCENE_H
#define ENDORET_SCENE_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/layers/prenorm_layer.h"
#include "nn/tensor.h"

typedef struct {
    int dim;                 /* image descriptor width (the image encoder's) */
    int heads, head_dim, mlp;               /* scene encoder: ViT-L 16 x 64, MLP 2048 */
    int dec_dim, dec_depth, dec_heads, dec_head_dim, dec_mlp; /* decoder: 512, 2, 16 x 85, 2048 */
    int img, patch, in_chans;               /* the image encoder's geometry (reconstruction) */
    double eps;              /* LayerNorm eps of both transformers (1e-5) */
    int base_mean;           /* 0: the descriptor is the scene token's output (the reference). 1: the mean
                              * of the views' L2-normalised descriptors plus a learned gate (scene_mean_gate,
                              * starting at 0) times the L2-normalised scene token output: it starts as
                              * averaging, and a few training scenes can only move it as far as they pay */
} scene_config;

/* The reference's choices for an image encoder of width dim with `heads` heads: scene heads = heads,
 * head_dim = dim / heads, mlp = 2 dim; decoder 512 wide, depth 2, 16 heads of dim / 12, mlp 2 dim. */
void scene_config_default(scene_config *c, int dim, int heads, int img, int patch);
/* ER_INPUT naming the field when a size does not fit. */
int scene_config_check(const scene_config *c);

typedef struct {
    scene_config cfg;
    int grid, L, patch_dim;
    tensor *scene_token;
    prenorm_layer enc;
    tensor *mean_gate;       /* [1], base_mean only */
    int n_encoder_params;    /* how many tensors scene_net_init appended before the decoder's */
    int has_decoder;
    tensor *embed_w, *embed_b, *mask_token, *pos_embed, *pred_w, *pred_b;
    prenorm_layer *dec;
} scene_net;

/* Creates the scene encoder (and, with_decoder, the decoder) on the host, appending the parameters
 * to pl (encoder first). Init as EFS: N(0, 0.02) tokens, xavier linears, fixed sin-cos positions. */
int scene_net_init(scene_net *s, const scene_config *c, int with_decoder, uint64_t seed, param_list *pl);
void scene_net_free(scene_net *s); /* the layer array; tensors belong to the list */

/* views [S, V, dim] (V >= 1) -> L2-normalised scene descriptors [S, dim]. */
tensor *scene_net_encode(const scene_net *s, const nn_ctx *ctx, tensor *views);
/* z [N, dim] scene descriptors, latent [N, 1 + R + K, dim] (the masked encoder output: [CLS], R
 * registers, K kept patches in shuffle order), ids_restore N*L -> pred [N, L, p*p*in_chans]. */
tensor *scene_net_decode(const scene_net *s, const nn_ctx *ctx, tensor *z, tensor *latent, int registers,
                         const int32_t *ids_restore);

/* Parameter counts (memory estimates): encoder, decoder (trainable part: without the fixed positions). */
double scene_encoder_param_count(const scene_config *c);
double scene_decoder_param_count(const scene_config *c);
/* Bytes a training step keeps (forward activations and their gradients, fp32) for N scene
 * descriptors, each from V - 1 views, and, when nrec > 0, the decoder's reconstruction of nrec
 * targets of L patches. */
double scene_train_bytes(const scene_config *c, double N, int V, double nrec, int L);

#endif
