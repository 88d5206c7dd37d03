/* vit.h — the Vision Transformer image encoder (timm layout), as used by MAE, EndoFinder and DINOv2.
 *
 *   image [B,3,H,W] -> patches [B,L,3*p*p] (conv with stride = kernel is exactly a reshape + linear)
 *   -> patch_embed.proj -> + pos_embed[patches] -> (optional MAE keep-gather) -> prepend [CLS]
 *   (+ pos_embed[0]) and register tokens -> depth x pre-norm block -> norm.
 *   block: x += ls1 * attn.proj(MHSA(attn.qkv(norm1(x))));  x += ls2 * mlp.fc2(gelu(mlp.fc1(norm2(x))))
 *
 * Parameter names are timm's, so timm / MAE / DINOv2 safetensors files load unchanged:
 *   cls_token [1,1,D], reg_token [1,R,D], pos_embed [1,P+L,D] (P = pos_prefix prefix tokens with a
 *   position: 1 = [CLS] as timm/MAE, 0 = timm no_embed_class), patch_embed.proj.weight [D,3,p,p],
 *   patch_embed.proj.bias, blocks.N.{norm1,attn.qkv,attn.proj,ls1.gamma,norm2,mlp.fc1,mlp.fc2,ls2.gamma},
 *   norm.weight / norm.bias.
 * A fixed 2-D sin-cos pos_embed (MAE) is stored like the learned one but frozen (no gradient). */
#ifndef ENDORET_VIT_H
#define ENDORET_VIT_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/layers/vit_block.h"
#include "nn/tensor.h"

typedef struct {
    int img;            /* training image side (square); the pos-embed grid is img / patch */
    int patch;          /* 14 or 16 (any divisor of img works) */
    int in_chans;       /* 3 */
    int dim, depth, heads;
    double mlp_ratio;   /* 4 */
    int qkv_bias;       /* 1 */
    int registers;      /* register tokens (DINOv2 "reg" models), 0 = none */
    int pos_prefix;     /* prefix tokens that carry a pos-embed row: 1 ([CLS]) or 0 */
    double layerscale;  /* LayerScale init value, 0 = no LayerScale */
    int pos_fixed;      /* 1 = fixed 2-D sin-cos (MAE, frozen), 0 = learned (trunc-normal 0.02) */
    double eps;         /* LayerNorm eps, 1e-6 as timm ViTs */
    int mlp_hidden;     /* MLP hidden width, 0 = dim * mlp_ratio */
    int swiglu;         /* 1 = SwiGLU MLP (DINOv2 ViT-g): fc1 [2 * hidden, dim], fc2(silu(x1) * x2) */
    int pos_interp;     /* how vit_set_img resamples a learned table (nn/models/pos_interp.h): the rule of the
                           code the weights come from; 0 = plain bicubic (MAE) */
} vit_config;

/* vit_tiny (192/12/3), vit_small (384/12/6), vit_base (768/12/12), vit_large (1024/24/16), vit_giant
 * (DINOv2's vit_giant2: 1536/40/24, SwiGLU MLP of hidden 4096); an optional "_patch14"/"_patch16" suffix
 * sets the patch. Defaults: img 224, patch 16, mlp 4, qkv
 * bias, no registers, no LayerScale, fixed sin-cos pos-embed, eps 1e-6. ER_INPUT on unknown names. */
int vit_config_preset(const char *name, vit_config *c);
/* Shape checks (dims divisible, img multiple of patch ...): ER_OK or ER_INPUT naming the field. */
int vit_config_check(const vit_config *c);

typedef struct {
    vit_config cfg;
    int grid;           /* patches per side at cfg.img */
    int L;              /* grid * grid */
    tensor *cls_token, *reg_token, *pos_embed, *patch_w, *patch_b, *norm_w, *norm_b;
    vit_block *blocks;
    struct lora *patch_lora;  /* optional LoRA on patch_embed.proj (nn/models/vit_lora.h), NULL = none */
    struct lora *loras;       /* every adapter of the model (vit_lora_attach), freed with it */
    int nlora;
    param_list params;  /* every tensor above (frozen ones included: they are saved too) */
} vit;

/* A new encoder initialised from `seed` (same seed => same weights). NULL + er_msg on a bad config. */
vit *vit_new(const vit_config *cfg, uint64_t seed);
/* The same weights (initialised on the host with the same Philox streams) moved to `device`
 * (DEV_CPU / DEV_CUDA), so a CPU and a CUDA model of one seed start bit-identical. NULL + er_msg
 * when the device cannot be used. */
vit *vit_new_on(int device, const vit_config *cfg, uint64_t seed);
void vit_free(vit *v);

/* Image [B,C,H,W] (host, H = W = any multiple of patch) -> patches [B,L,C*p*p] in conv-weight order
 * (c, dy, dx), the input of patch_embed.proj. */
void vit_patchify(const float *img, int B, int C, int H, int W, int p, float *out);

/* Encoder forward (ctx: nn/context.h; nothing in the ViT depends on it yet). img: host [B,C,H,W] with H = W = cfg.img (uploaded once when the model is on a
 * device). keep: NULL (all L patches) or
 * B*K patch indices per sample (MAE). Result [B, 1 + R + K, D] after the final norm: token 0 is
 * [CLS], then the R registers, then the kept patches in the order of `keep`. */
tensor *vit_forward(vit *v, const nn_ctx *ctx, const float *img, int B, const int32_t *keep, int K);
/* The same from an image tensor [B,C,H,W] already on the model's device (patchify runs there as
 * view ops + one strided copy). keep/K as above (host indices, uploaded by the gather op). */
tensor *vit_forward_t(vit *v, const nn_ctx *ctx, tensor *img, const int32_t *keep, int K);
/* [CLS] output [B, D] of full (unmasked) images. */
tensor *vit_cls(vit *v, const nn_ctx *ctx, const float *img, int B);

/* Resample the patch rows of pos_embed to a new image side with cfg.pos_interp, the rule of the code the
 * weights come from (nn/models/pos_interp.h: MAE, timm / DINOv2 reg, DINO's 0.1 offset); fixed sin-cos
 * tables are recomputed. */
int vit_set_img(vit *v, int img);

/* The MLP's hidden width H (fc2's input): mlp_hidden, or dim * mlp_ratio. */
int64_t vit_mlp_hidden(const vit_config *c);
/* Forward FLOPs (multiply-add = 2) for B images of T tokens (T = 1 + R + L unmasked). */
double vit_forward_flops(const vit_config *c, int B, int T);

#endif
