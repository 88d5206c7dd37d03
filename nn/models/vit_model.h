/* vit_model.h — the ViT behind the model interface (nn/models/model.h): its model.* config keys,
 * and the architecture entry model.c registers. Descriptor: the L2-normalised [CLS] output.
 *
 * A ViT file is recognised by its endoret.vit.* metadata (what we write: vit_config_add_meta) or,
 * for plain timm / MAE / DINOv2 files, by the tensor patch_embed.proj.weight; its config comes
 * from vit_config_from_st. ViT files keep that format (no endoret.arch key): older files load. */
#ifndef ENDORET_VIT_MODEL_H
#define ENDORET_VIT_MODEL_H

#include "nn/base/config.h"
#include "nn/models/model.h"
#include "nn/models/vit.h"

/* The model.* keys of a ViT (a training config's model section). */
typedef struct {
    char *arch;        /* vit_tiny | vit_small | vit_base | vit_large (+ _patch14 / _patch16) */
    int img, patch, dim, depth, heads, registers, pos_learned;
    double layerscale;
} vit_args;

/* vit_large, img 224, patch 16, no overrides, fixed sin-cos pos-embed. */
void vit_args_defaults(vit_args *a);
/* The key table bound to a (n receives its length; model.arch first). */
const cfg_spec *vit_args_keys(vit_args *a, int *n);
void vit_args_free(vit_args *a);
/* The preset named by a->arch with the overrides applied, checked. */
int vit_args_config(const vit_args *a, vit_config *v);

/* A model that owns v (freed by model_free). */
model *vit_model_wrap(vit *v);
/* The encoder inside a ViT model (NULL for another family). */
vit *vit_model_vit(const model *m);
/* The encoder of a ViT model, which is freed without it (the caller owns the vit); NULL (and m
 * untouched) for another family. */
vit *vit_model_take(model *m);

extern const model_arch vit_arch;

#endif
