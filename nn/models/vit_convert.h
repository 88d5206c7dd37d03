/* vit_convert.h — a ViT weights file rewritten in another public layout (timm, Meta DINOv2, Hugging
 * Face), tensor bytes and dtypes kept: `endoret convert`. What cannot be mapped exactly is refused with
 * one message (exit 2): Hugging Face has LayerScale in every layer, so a ViT without it has no HF form;
 * Meta and HF give registers no position, so a table with rows for them (endoret's pos_prefix 1 + R) has
 * no Meta/HF form.
 *
 * Exact, byte for byte, in both directions: renames, HF's query/key/value <-> attn.qkv (rows split /
 * stacked), SwiGLU fc1/fc2 <-> w12/w3 <-> weights_in/weights_out, Meta's chunked blocks.C.N -> blocks.N.
 * The one rewrite that changes values is timm's own for DINOv2 with registers (timm
 * _convert_dinov2): its vit_*_reg4_dinov2 has no position row for [CLS], so Meta's / HF's row 0 is added
 * into cls_token (in fp32, written F32: the same sum the forward computes, so the network's output is
 * unchanged bit for bit) and the table keeps the patch rows; back to Meta / HF, the [CLS] row is zero (a
 * zero row is not added, so timm -> meta -> timm is exact; meta -> timm -> meta is not, and says so).
 * mask_token (unused at inference) goes from Meta to HF and back, and is left out of timm files. */
#ifndef ENDORET_VIT_CONVERT_H
#define ENDORET_VIT_CONVERT_H

#include <stddef.h>

#include "checkpoints/safetensors.h"

/* Write the ViT of `in` (any layout of vit_layouts.h, loaded strictly first) to `out_path` in layout
 * `to` (VIT_LAYOUT_TIMM, VIT_LAYOUT_META or VIT_LAYOUT_HF), atomically. The metadata keeps the source's
 * position-table rule (endoret.vit.pos_interp; `pos_interp` >= 0 records that rule instead, for a file
 * whose layout cannot tell, as a bare DINO v1 backbone with timm's names) and, when the source had it,
 * endoret.vit.heads. `note` gets one line per thing worth saying (layouts, tensors left out, the [CLS]
 * fold). ER_INPUT + message naming the file when the ViT cannot be written in `to` exactly. */
int vit_convert(const st_file *in, int to, int pos_interp, const char *out_path, char *note, size_t nnote);

#endif
