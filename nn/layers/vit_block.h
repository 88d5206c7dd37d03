/* vit_block.h — one pre-norm transformer block (timm names), shared by the ViT encoder
 * (nn/models/vit.h) and the MAE decoder (nn/models/mae.h):
 *   x += ls1 * attn.proj(MHSA(attn.qkv(norm1(x))));  x += ls2 * mlp.fc2(gelu(mlp.fc1(norm2(x)))) */
#ifndef ENDORET_VIT_BLOCK_H
#define ENDORET_VIT_BLOCK_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/tensor.h"

/* One pre-norm transformer block's parameters (shared with the MAE decoder). swiglu: the MLP is
 * DINOv2 ViT-g's SwiGLU, fc1 [2H, D] packed (x1, x2), fc2 [D, H]: fc2(silu(x1) * x2) (nn/layers/swiglu.h). */
typedef struct {
    tensor *norm1_w, *norm1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ls1;
    tensor *norm2_w, *norm2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *ls2;
    int swiglu;
    /* optional LoRA adapters (nn/layers/lora.h) on attn.qkv, attn.proj, mlp.fc1, mlp.fc2; NULL = none.
     * Owned by whoever attached them (nn/models/vit_lora.c). */
    struct lora *lora[4];
} vit_block;

enum { VIT_LORA_QKV, VIT_LORA_PROJ, VIT_LORA_FC1, VIT_LORA_FC2 };

/* Creates the block's parameters named "<prefix>.norm1.weight" ... and appends them to pl,
 * initialised as MAE (xavier-uniform linears, zero biases, unit norms; LayerScale = ls_init). */
void vit_block_init(vit_block *b, const char *prefix, int dim, double mlp_ratio, int qkv_bias,
                    double ls_init, uint64_t seed, param_list *pl);
/* The same with the MLP's hidden width given (H) and optionally a SwiGLU MLP (fc1 then has 2H rows). */
void vit_block_init_mlp(vit_block *b, const char *prefix, int dim, int64_t hidden, int swiglu, int qkv_bias,
                        double ls_init, uint64_t seed, param_list *pl);
/* x [B,T,D] -> [B,T,D]. */
tensor *vit_block_forward(const vit_block *b, const nn_ctx *ctx, tensor *x, int heads, float eps);
/* blocks[0 .. n) in turn. Without grad, each block's intermediates are released once its output is
 * copied out, so an inference forward holds one block's activations, not all of them. */
tensor *vit_blocks_forward(const vit_block *blocks, int n, const nn_ctx *ctx, tensor *x, int heads, float eps);

#endif
