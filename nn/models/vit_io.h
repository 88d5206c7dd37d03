/* vit_io.h — ViT weights files: timm / MAE / DINOv2 safetensors (config inferred from the tensor
 * shapes) and our own (exact config in the endoret.vit.* metadata). */
#ifndef ENDORET_VIT_IO_H
#define ENDORET_VIT_IO_H

#include "checkpoints/safetensors.h"
#include "nn/models/vit.h"

/* Infer a vit_config from a timm/MAE/endoret file (names under `prefix`): dim and patch from
 * patch_embed.proj.weight, depth from blocks.N, heads = dim / 64 (timm's convention) unless the
 * metadata "endoret.vit.heads" says otherwise, registers from reg_token (timm) or register_tokens
 * (Meta's DINOv2; loaded into our reg_token), LayerScale from blocks.0.ls1.gamma, img and which
 * prefix tokens have a position from the pos_embed rows (1 + L: [CLS] only, timm and Meta; L: none,
 * timm no_embed_class as vit_*_reg4_dinov2; 1 + R + L: [CLS] and registers). A file with both
 * register names, or registers not shaped [1, R, D], is ER_INPUT naming it. */
int vit_config_from_st(const st_file *f, const char *prefix, vit_config *c);
/* The register tokens of a file under prefix: timm's reg_token or Meta's register_tokens (its full
 * name in *name, valid until the next call on this thread), NULL when it has none (*name NULL) or
 * both (*name set, ER_INPUT message recorded). */
const st_tensor *vit_st_registers(const st_file *f, const char *prefix, const char **name);
/* Build + load an encoder from a file (strict: every encoder tensor must be present). */
vit *vit_load(const st_file *f, const char *prefix);
/* Metadata entries describing cfg (endoret.vit.*), so vit_config_from_st finds it exactly. */
void vit_config_add_meta(const vit_config *c, st_writer *w);

#endif
