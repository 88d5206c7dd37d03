/* vit_io.h — ViT weights files: timm / MAE / DINOv2 safetensors (config inferred from the tensor
 * shapes) and our own (exact config in the endoret.vit.* metadata). */
#ifndef ENDORET_VIT_IO_H
#define ENDORET_VIT_IO_H

#include "checkpoints/safetensors.h"
#include "nn/models/vit.h"

/* Infer a vit_config from a timm/MAE/endoret file (names under `prefix`): dim and patch from
 * patch_embed.proj.weight, depth from blocks.N, heads = dim / 64 (timm's convention) unless the
 * metadata "endoret.vit.heads" says otherwise, registers from reg_token, LayerScale from
 * blocks.0.ls1.gamma, img from pos_embed rows. */
int vit_config_from_st(const st_file *f, const char *prefix, vit_config *c);
/* Build + load an encoder from a file (strict: every encoder tensor must be present). */
vit *vit_load(const st_file *f, const char *prefix);
/* Metadata entries describing cfg (endoret.vit.*), so vit_config_from_st finds it exactly. */
void vit_config_add_meta(const vit_config *c, st_writer *w);

#endif
