/* vit_memory.h — the memory a ViT needs, from its config alone (before anything is allocated), for
 * the refusal of runs that cannot fit (nn/base/memory.h). */
#ifndef ENDORET_VIT_MEMORY_H
#define ENDORET_VIT_MEMORY_H

#include <stdint.h>

#include "nn/models/vit.h"

/* Parameters of one pre-norm transformer block of width dim (norms, qkv, proj, MLP, LayerScale). */
double vit_block_param_count(int dim, double mlp_ratio, int qkv_bias, int layerscale);
/* Parameters (and the frozen sin-cos position table) of the encoder. */
double vit_param_count(const vit_config *c);
/* Bytes a training step keeps for N sequences of T tokens through `depth` blocks of width `dim`
 * (the encoder, or an MAE decoder with its own width/depth): forward activations saved for
 * backward and their gradients (both live in the step arena until the step ends), fp32. */
double vit_blocks_train_bytes(int dim, int depth, int heads, double mlp_ratio, double N, double T);

/* Bytes a descriptor forward (eval, no tape) of B images of T tokens takes beyond the weights:
 * what the blocks' outputs keep in the step arena, the attention kernel's workspace (the backend's
 * own size function) and the input images of side img. */
double vit_forward_bytes(const vit_config *c, int B, int T, int img);

#endif
