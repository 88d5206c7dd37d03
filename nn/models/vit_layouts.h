/* vit_layouts.h — the public weight layouts of a ViT, each read by a strict name map into endoret's
 * own (timm) names, the "canonical" names vit.c uses:
 *
 *   endoret  our files (endoret.vit.* metadata): canonical names; other tensors (optimizer state,
 *            a scene encoder) are not the ViT's business and are left alone
 *   timm     vit_*_patch14_dinov2 / vit_*_reg4_dinov2 and other timm ViTs: reg_token, pos_embed without
 *            prefix rows when no_embed_class, blocks.N.ls1.gamma, packed SwiGLU in mlp.fc1 / mlp.fc2;
 *            head.* (classifier) dropped
 *   mae      timm names plus MAE's pre-training decoder (decoder_*, mask_token: dropped)
 *   meta     facebookresearch/dinov2: register_tokens, mask_token (dropped), pos_embed with the [CLS]
 *            row, blocks.N... or chunked blocks.C.N..., SwiGLU as mlp.w12 / mlp.w3
 *   hf       Hugging Face Dinov2(WithRegisters)Model: embeddings.{cls_token, register_tokens,
 *            position_embeddings, patch_embeddings.projection, mask_token (dropped)},
 *            encoder.layer.N.{norm1, attention.attention.{query,key,value} (stacked into attn.qkv),
 *            attention.output.dense, layer_scale1.lambda1, norm2, mlp.fc1/fc2 or
 *            mlp.weights_in/weights_out (SwiGLU), layer_scale2.lambda1}, layernorm; an optional
 *            "dinov2." prefix (classifier.* dropped)
 *   dinov1   facebookresearch/dino: timm names under backbone. / module. / teacher. / student.
 *            prefixes, the DINO projection head (head.*) dropped
 *
 * Strict: every tensor of the file is mapped, or in the layout's short list of dropped ones (said
 * by name in `dropped`), or the file is refused naming it; a missing or reshaped tensor is refused
 * naming it. Nothing is loaded partially. */
#ifndef ENDORET_VIT_LAYOUTS_H
#define ENDORET_VIT_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoints/safetensors.h"

enum { VIT_LAYOUT_ENDORET, VIT_LAYOUT_TIMM, VIT_LAYOUT_MAE, VIT_LAYOUT_META, VIT_LAYOUT_HF, VIT_LAYOUT_DINOV1,
       VIT_LAYOUT_COUNT };

/* One canonical tensor: the file tensor it comes from, or HF's query / key / value stacked along dim 0. */
typedef struct {
    char *name;               /* canonical name, e.g. "blocks.3.attn.qkv.weight" */
    int nparts;               /* 1, or 3 (HF q, k, v) */
    const st_tensor *part[3];
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
} vit_tensor;

typedef struct {
    const st_file *f;
    int layout;
    char prefix[128];         /* in front of every backbone name in the file ("teacher.backbone.", "") */
    int chunk;                /* Meta chunked blocks (blocks.C.N): blocks per chunk; 0 = blocks.N */
    int swiglu_names;         /* the file names its MLP as a SwiGLU (Meta w12/w3, HF weights_in/out) */
    int n;
    vit_tensor *t;
    int ndropped;
    char **dropped;           /* file names left out on purpose (mask_token, heads, MAE decoder) */
} vit_tensors;

/* Recognise the layout of f (names under `prefix`, usually "") and map it. strict: a file tensor the
 * layout does not know is ER_INPUT naming it (not for the endoret layout). ER_INPUT with one message
 * naming the file and the tensor: no ViT, two candidate prefixes (teacher and student), two tensors
 * for one canonical name, a missing HF query / key / value part, parts of different shapes. */
int vit_tensors_open(const st_file *f, const char *prefix, int strict, vit_tensors *out);
void vit_tensors_free(vit_tensors *v);
const vit_tensor *vit_tensors_find(const vit_tensors *v, const char *canon);
/* Every value of t as float32 (F16/BF16/F64 converted); dst holds t->numel. */
int vit_tensors_read(const vit_tensors *v, const vit_tensor *t, float *dst);
/* The file name (prefix included) a canonical tensor has, or would have, in v's layout, for messages. */
void vit_tensors_file_name(const vit_tensors *v, const char *canon, char *out, size_t n);

/* The name of canonical `canon` (part 0..2 for HF's attn.qkv) in `layout` (swiglu: the MLP is
 * SwiGLU, which Meta and HF name differently); 0 when the layout has no such tensor. */
int vit_layout_name_of(int layout, const char *canon, int part, int swiglu, char *out, size_t n);
const char *vit_layout_label(int layout);     /* "endoret", "timm", "mae", "meta", "hf", "dinov1" */
const char *vit_layout_describe(int layout);  /* one line */
/* The position-table resampling rule (nn/models/pos_interp.h) of the code that trained a file of
 * this layout: see docs/models.md. */
int vit_layout_pos_interp(int layout, int registers);

#endif
