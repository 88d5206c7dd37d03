/* dual_model.h — the dual-backbone network (nn/models/dual.h) behind the model interface
 * (nn/models/model.h): model.arch = dual_backbone; the descriptor is the fused, L2-normalised
 * embedding (512-d in the paper), or the L2-normalised pooled branch for a head-less single branch.
 *
 * Keys (model.arch first): model.img; dual.branches = both | gastronet | dinov2; dual.pool = cls |
 * gem | mean; dual.embed_dim (512; 0 = no head, one branch only); dual.lora_r (8; 0 = no adapters:
 * frozen backbones, head only), dual.lora_alpha (16), dual.lora_dropout (0.05); dual.gastronet /
 * dual.dinov2 = plain ViT weights files (strict; '' = random init, said on stderr);
 * dual.gastronet_arch / dual.dinov2_arch = the presets a random branch is built from
 * (vit_small_patch16 / vit_small_patch14, + 4 registers and LayerScale 1.0 for DINOv2);
 * dual.depth overrides a random branch's depth (tiny demo models).
 *
 * Files: model_save writes every tensor under its prefixed name with endoret.arch = dual_backbone
 * and endoret.dual.* metadata (a training checkpoint keeps the adapters unmerged);
 * dual_model_save_merged writes the export: W + s B A merged into every adapted weight, no
 * adapter tensors, lora_r 0 in the metadata — what `endoret embed --model` loads. */
#ifndef ENDORET_DUAL_MODEL_H
#define ENDORET_DUAL_MODEL_H

#include "nn/base/config.h"
#include "nn/models/dual.h"
#include "nn/models/model.h"

typedef struct {
    char *arch;                     /* dual_backbone */
    int img;
    char *branches, *pool;
    int embed_dim, lora_r;
    double lora_alpha, lora_dropout;
    char *gastronet, *dinov2;       /* weights files, '' = random init */
    char *gastronet_arch, *dinov2_arch;
    int depth, dinov2_registers;
} dual_args;

void dual_args_defaults(dual_args *a);
const cfg_spec *dual_args_keys(dual_args *a, int *n);
void dual_args_free(dual_args *a);

/* The network inside (NULL for another family). */
dual_net *dual_model_net(const model *m);
/* The merged export (see above), atomically. */
int dual_model_save_merged(const model *m, const char *path, int64_t step);

extern const model_arch dual_arch;

#endif
