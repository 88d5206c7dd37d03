/* vit_io.h — ViT weights files: our own (exact config in the endoret.vit.* metadata) and the public
 * layouts of nn/models/vit_layouts.h (timm, MAE, Meta DINOv2, Hugging Face, DINO v1), whose config is
 * inferred from the tensor shapes. */
#ifndef ENDORET_VIT_IO_H
#define ENDORET_VIT_IO_H

#include "checkpoints/safetensors.h"
#include "nn/models/vit.h"
#include "nn/models/vit_layouts.h"

/* The config a mapped file describes: dim and patch from patch_embed.proj.weight, depth from
 * blocks.N, heads = dim / 64 (timm's convention) unless the metadata "endoret.vit.heads" says
 * otherwise, registers from reg_token (any layout's name for it), LayerScale from blocks.0.ls1.gamma,
 * the MLP's width from mlp.fc2 and SwiGLU when fc1 has twice fc2's hidden rows, img and which prefix
 * tokens have a position from the pos_embed rows (1 + L: [CLS] only, timm and Meta; L: none, timm
 * no_embed_class as vit_*_reg4_dinov2; 1 + R + L: [CLS] and registers), the position-table rule from
 * "endoret.vit.pos_interp" or else the layout's (vit_layout_pos_interp). Registers not shaped [1, R, D]
 * or an MLP of unrelated widths are ER_INPUT naming the tensor. */
int vit_config_from_tensors(const vit_tensors *t, vit_config *c);
/* The same for a file (names under `prefix`, any layout). */
int vit_config_from_st(const st_file *f, const char *prefix, vit_config *c);
/* Build + load an encoder from a mapped file. Every encoder tensor must be there with its shape and
 * finite values; strict: a tensor of the file that the encoder does not use (a 13th block of a
 * 12-block file, LayerScale in some blocks only) is refused too (not for our own files). */
vit *vit_load_tensors(const vit_tensors *t, int strict);
/* vit_tensors_open (not strict: other tensors are left alone, as a scene file's) + vit_load_tensors. */
vit *vit_load(const st_file *f, const char *prefix);
/* Metadata entries describing cfg (endoret.vit.*), so vit_config_from_st finds it exactly. */
void vit_config_add_meta(const vit_config *c, st_writer *w);

#endif
