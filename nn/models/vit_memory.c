/* vit_memory.c — see vit_memory.h. The per-token count follows nn/models/vit.c's block: what the
 * tape keeps per block (layernorm outputs and statistics, qkv, attention output and its
 * log-sum-exp, projection, residual sums, fc1 and GELU outputs, fc2); every kept activation gets a
 * gradient buffer of the same size during backward; the attention scores are recomputed per head
 * and never stored (kernels/backend.h). Checked against measured peak RSS in tests/nn/models. */
#include "nn/models/vit_memory.h"

#include "kernels/backend.h"

double vit_block_param_count(int dim, double mlp_ratio, int qkv_bias, int layerscale) {
    double D = dim, hid = (double)(int64_t)(dim * mlp_ratio);
    return 4 * D                                                    /* norm1, norm2 */
         + 3 * D * D + (qkv_bias ? 3 * D : 0)                       /* attn.qkv */
         + D * D + D                                                /* attn.proj */
         + hid * D + hid + D * hid + D                              /* mlp.fc1, mlp.fc2 */
         + (layerscale ? 2 * D : 0);                                /* ls1, ls2 */
}

double vit_param_count(const vit_config *c) {
    double D = c->dim, g = (double)(c->img / c->patch), L = g * g;
    double n = D * c->in_chans * c->patch * c->patch + D;           /* patch_embed.proj */
    n += D + c->registers * D + (c->pos_prefix + L) * D;            /* cls, registers, pos_embed */
    /* the MLP's width from the config (SwiGLU: fc1 has 2H rows) */
    double H = (double)vit_mlp_hidden(c), block = vit_block_param_count(c->dim, 0, c->qkv_bias, c->layerscale > 0);
    block += (c->swiglu ? 2 : 1) * (H * D + H) + D * H;
    return n + c->depth * block + 2 * D;                            /* final norm */
}

double vit_blocks_train_bytes(int dim, int depth, int heads, double mlp_ratio, double N, double T) {
    double D = dim, hid = (double)(int64_t)(dim * mlp_ratio);
    /* per token per block: norm1 D + stats 2, qkv 3D and its per-head q/k/v copies 3D, attention
     * output D and its head-merged copy D + lse heads, proj D, residual D, norm2 D + stats 2,
     * fc1 hid, gelu hid, fc2 D, residual D. Measured (ViT-S/16 224, MAE keep 99 tokens, decoder
     * 64x1): 87.6 MB per view of peak RSS vs 83 MB from this count plus the inputs. */
    double per_token = 13 * D + 2 * hid + heads + 4;
    /* fp32; the gradients of the kept activations no longer add a second copy: backward recycles the
     * buffers it has finished with (nn/autograd.c), so only a frontier of them is live. x1.1: the step
     * arena's slack and small temporaries. Measured 2026-11-24 (ViT-S/16 224, batch 16, cls objective):
     * peak RSS 1.69 GB with 0.35 GB of weights, gradients and AdamW state, vs 1.34 GB from this count
     * (2.97 GB before the recycling, vs 2.69 GB with the old x2). */
    return 1.1 * 4.0 * N * T * per_token * depth;
}

double vit_forward_bytes(const vit_config *c, int B, int T, int img) {
    double D = c->dim, hid = (double)vit_mlp_hidden(c) * (c->swiglu ? 2 : 1);
    /* per token per block, eval: about 5 D + the MLP's hidden width stay in the arena until the
     * forward ends. Measured 2026-11-26 (ViT-S/16 224, batch 32, embed, 2 threads): peak RSS 1.14 GB
     * with ~0.2 GB of packed weights, vs 1.05 GB from this count plus the inputs. */
    double blocks = 4.0 * B * (double)T * c->depth * (5 * D + hid);
    int heads = c->heads > 0 ? c->heads : 1;
    /* (the CPU attention's workspace has one layout for every compute: fp32 names it; and the
     * count stays fp32's, an upper bound for a bf16 forward) */
    double work = 4.0 * (double)backend_get(DEV_CPU)->attention_workspace(GEMM_COMPUTE_FP32, B, heads, T, T, c->dim / heads);
    return blocks + work + 4.0 * B * 3.0 * img * (double)img;
}
