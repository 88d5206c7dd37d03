/* dual.h — the dual-backbone retrieval network (Kim et al., Front. Med. 2025; spec section 2):
 *
 *   image [B,3,224,224] -> GastroNet branch: DINO v1 ViT-S/16 (+ LoRA) -> final norm -> pool -> f_1 [384]
 *                       -> DINOv2 branch: ViT-S/14, 4 registers, LayerScale (+ LoRA) -> pool -> f_2 [384]
 *   e = L2(GELU(BN1d(Linear_768->512(concat[L2 f_1, L2 f_2]))))   (nn/layers/fusion_head.h)
 *
 * pool: the [CLS] token (what the reference actually uses), mean or GeM of the patch tokens
 * (nn/layers/pooling.h; one learnable p per branch). Single-backbone variants (the paper's backbone
 * table) keep one branch, with the same head (384 -> 512) or none (embed_dim 0: e = L2(f)).
 *
 * Tensor names: each branch's timm names under "gastronet." / "dinov2." (LoRA tensors
 * "<branch>.<module>.lora_A.weight"), "<branch>.gem_p", "fusion.0.*" (Linear), "fusion.1.*" (BN).
 * Backbones are frozen whenever LoRA is attached or lora_r = 0 (the frozen-backbone baseline):
 * only the adapters, the head and the GeM exponents train.
 *
 * Branch weight files (dual_branch_load) are checked strictly, unlike the reference's
 * load_state_dict(strict=False) that left the DINOv2 blocks random (spec section 2.3): a missing,
 * unexpected or misshaped tensor is one ER_INPUT message naming it. */
#ifndef ENDORET_DUAL_H
#define ENDORET_DUAL_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/layers/fusion_head.h"
#include "nn/layers/lora.h"
#include "nn/layers/pooling.h"
#include "nn/models/vit.h"

enum { DUAL_GASTRONET = 1, DUAL_DINOV2 = 2, DUAL_BOTH = 3 };
#define DUAL_NBRANCH 2
extern const char *const dual_branch_name[DUAL_NBRANCH]; /* "gastronet", "dinov2" */

typedef struct {
    int branches;        /* DUAL_* mask */
    pool_kind pool;
    int embed_dim;       /* fusion output (512); 0 = no head (one branch only) */
    lora_config lora;    /* r = 0: no adapters (frozen backbones, head only) */
    float gem_eps;       /* 1e-6 */
} dual_config;

typedef struct {
    dual_config cfg;
    vit *v[DUAL_NBRANCH];        /* NULL when the branch is off */
    tensor *gem_p[DUAL_NBRANCH]; /* [1], GeM exponent (pool = gem) */
    int has_head;
    fusion_head head;
    param_list params;           /* every tensor (the branches' too), prefixed names */
    param_list own;              /* the tensors dual_net owns: GeM p, head (the branches own theirs) */
} dual_net;

/* "both" | "gastronet" | "dinov2" -> DUAL_*; ER_INPUT naming key. */
int dual_branches_parse(const char *s, const char *key, int *mask);
const char *dual_branches_name(int mask);

/* The network from its branches (taken over: v[i] NULL for an off branch, which must match
 * cfg->branches; every branch has the same img). Renames the branch tensors with their prefix,
 * freezes them, attaches LoRA (cfg->lora.r > 0, seed), adds GeM p (init 3) and the head (seed).
 * NULL + er_msg on a bad config (the branches are freed). */
dual_net *dual_new(const dual_config *cfg, vit *v[DUAL_NBRANCH], uint64_t seed);
void dual_free(dual_net *d);

/* A branch backbone from a weights file in any layout of nn/models/vit_layouts.h (timm, Meta DINOv2
 * with registers, Hugging Face, DINO v1 with its backbone./teacher. prefixes and head), strictly
 * checked (a missing, reshaped or unknown tensor is ER_INPUT naming it), its position table
 * resampled to img with the rule of the file's layout (nn/models/pos_interp.h). */
vit *dual_branch_load(const char *path, int img);

/* Descriptor [B, out] of images [B, 3, img, img] already on the model's device. */
tensor *dual_forward(dual_net *d, const nn_ctx *ctx, tensor *img);
/* Descriptor width. */
int dual_out_dim(const dual_net *d);
/* Trainable parameter count (adapters + head + GeM p). */
int64_t dual_trainable(const dual_net *d);

#endif
