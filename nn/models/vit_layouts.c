/* vit_layouts.c — recognise a ViT weight layout and map its names onto endoret's (timm) names. */
#include "nn/models/vit_layouts.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/models/pos_interp.h"

#define L_END (1 << VIT_LAYOUT_ENDORET)
#define L_TIMM (1 << VIT_LAYOUT_TIMM)
#define L_MAE (1 << VIT_LAYOUT_MAE)
#define L_META (1 << VIT_LAYOUT_META)
#define L_HF (1 << VIT_LAYOUT_HF)
#define L_DINO (1 << VIT_LAYOUT_DINOV1)
#define L_TLIKE (L_END | L_TIMM | L_MAE | L_DINO) /* timm's names */

/* file name <-> canonical name. For the reverse map the first entry of a layout wins, so a layout's
 * preferred spelling comes first; swiglu 1: used for SwiGLU MLPs only, 0: for GELU MLPs only, -1: any. */
typedef struct {
    const char *file, *canon;
    int layouts, part, swiglu;
} name_map;

static const name_map TOP[] = {
    {"cls_token", "cls_token", L_TLIKE | L_META, 0, -1},
    {"register_tokens", "reg_token", L_META, 0, -1},
    {"reg_token", "reg_token", L_TLIKE | L_META, 0, -1},
    {"register_tokens", "reg_token", L_TLIKE, 0, -1},
    {"pos_embed", "pos_embed", L_TLIKE | L_META, 0, -1},
    {"patch_embed.proj.weight", "patch_embed.proj.weight", L_TLIKE | L_META, 0, -1},
    {"patch_embed.proj.bias", "patch_embed.proj.bias", L_TLIKE | L_META, 0, -1},
    {"norm.weight", "norm.weight", L_TLIKE | L_META, 0, -1},
    {"norm.bias", "norm.bias", L_TLIKE | L_META, 0, -1},
    {"embeddings.cls_token", "cls_token", L_HF, 0, -1},
    {"embeddings.register_tokens", "reg_token", L_HF, 0, -1},
    {"embeddings.position_embeddings", "pos_embed", L_HF, 0, -1},
    {"embeddings.patch_embeddings.projection.weight", "patch_embed.proj.weight", L_HF, 0, -1},
    {"embeddings.patch_embeddings.projection.bias", "patch_embed.proj.bias", L_HF, 0, -1},
    {"layernorm.weight", "norm.weight", L_HF, 0, -1},
    {"layernorm.bias", "norm.bias", L_HF, 0, -1},
};

static const name_map BLOCK[] = {
    {"norm1.weight", "norm1.weight", L_TLIKE | L_META | L_HF, 0, -1},
    {"norm1.bias", "norm1.bias", L_TLIKE | L_META | L_HF, 0, -1},
    {"attn.qkv.weight", "attn.qkv.weight", L_TLIKE | L_META, 0, -1},
    {"attn.qkv.bias", "attn.qkv.bias", L_TLIKE | L_META, 0, -1},
    {"attn.proj.weight", "attn.proj.weight", L_TLIKE | L_META, 0, -1},
    {"attn.proj.bias", "attn.proj.bias", L_TLIKE | L_META, 0, -1},
    {"ls1.gamma", "ls1.gamma", L_TLIKE | L_META, 0, -1},
    {"norm2.weight", "norm2.weight", L_TLIKE | L_META | L_HF, 0, -1},
    {"norm2.bias", "norm2.bias", L_TLIKE | L_META | L_HF, 0, -1},
    {"mlp.w12.weight", "mlp.fc1.weight", L_META, 0, 1},
    {"mlp.w12.bias", "mlp.fc1.bias", L_META, 0, 1},
    {"mlp.w3.weight", "mlp.fc2.weight", L_META, 0, 1},
    {"mlp.w3.bias", "mlp.fc2.bias", L_META, 0, 1},
    {"mlp.weights_in.weight", "mlp.fc1.weight", L_HF, 0, 1},
    {"mlp.weights_in.bias", "mlp.fc1.bias", L_HF, 0, 1},
    {"mlp.weights_out.weight", "mlp.fc2.weight", L_HF, 0, 1},
    {"mlp.weights_out.bias", "mlp.fc2.bias", L_HF, 0, 1},
    {"mlp.fc1.weight", "mlp.fc1.weight", L_TLIKE | L_META | L_HF, 0, -1},
    {"mlp.fc1.bias", "mlp.fc1.bias", L_TLIKE | L_META | L_HF, 0, -1},
    {"mlp.fc2.weight", "mlp.fc2.weight", L_TLIKE | L_META | L_HF, 0, -1},
    {"mlp.fc2.bias", "mlp.fc2.bias", L_TLIKE | L_META | L_HF, 0, -1},
    {"ls2.gamma", "ls2.gamma", L_TLIKE | L_META, 0, -1},
    {"attention.attention.query.weight", "attn.qkv.weight", L_HF, 0, -1},
    {"attention.attention.key.weight", "attn.qkv.weight", L_HF, 1, -1},
    {"attention.attention.value.weight", "attn.qkv.weight", L_HF, 2, -1},
    {"attention.attention.query.bias", "attn.qkv.bias", L_HF, 0, -1},
    {"attention.attention.key.bias", "attn.qkv.bias", L_HF, 1, -1},
    {"attention.attention.value.bias", "attn.qkv.bias", L_HF, 2, -1},
    {"attention.output.dense.weight", "attn.proj.weight", L_HF, 0, -1},
    {"attention.output.dense.bias", "attn.proj.bias", L_HF, 0, -1},
    {"layer_scale1.lambda1", "ls1.gamma", L_HF, 0, -1},
    {"layer_scale2.lambda1", "ls2.gamma", L_HF, 0, -1},
};
#define NTOP (int)(sizeof TOP / sizeof *TOP)
#define NBLOCK (int)(sizeof BLOCK / sizeof *BLOCK)

static const char *const LABELS[VIT_LAYOUT_COUNT] = {"endoret", "timm", "mae", "meta", "hf", "dinov1"};
static const char *const DESCR[VIT_LAYOUT_COUNT] = {
    "endoret ViT (endoret.vit.* metadata)",
    "timm VisionTransformer (vit_*_dinov2, vit_*_reg4_dinov2, ...)",
    "MAE pre-training checkpoint (timm encoder names; decoder dropped)",
    "Meta DINOv2 (facebookresearch/dinov2 DinoVisionTransformer)",
    "Hugging Face Dinov2Model / Dinov2WithRegistersModel",
    "DINO v1 (facebookresearch/dino vision_transformer)",
};

const char *vit_layout_label(int layout) { return layout >= 0 && layout < VIT_LAYOUT_COUNT ? LABELS[layout] : "?"; }
const char *vit_layout_describe(int layout) { return layout >= 0 && layout < VIT_LAYOUT_COUNT ? DESCR[layout] : "?"; }

int vit_layout_pos_interp(int layout, int registers) {
    switch (layout) {
    case VIT_LAYOUT_TIMM: return POS_INTERP_BICUBIC_AA;                 /* resample_abs_pos_embed */
    case VIT_LAYOUT_META: return registers ? POS_INTERP_BICUBIC_AA      /* hub *_reg builders */
                                           : POS_INTERP_BICUBIC_OFFSET; /* hub defaults, offset 0.1 */
    case VIT_LAYOUT_HF: return registers ? POS_INTERP_BICUBIC_AA : POS_INTERP_BICUBIC;
    case VIT_LAYOUT_DINOV1: return POS_INTERP_BICUBIC_OFFSET;
    default: return POS_INTERP_BICUBIC; /* MAE interpolate_pos_embed, endoret's own files */
    }
}

/* "blocks.N.rest" (chunked: "blocks.C.N.rest") or HF "encoder.layer.N.rest": the block index and rest */
static int split_block(int layout, int chunked, const char *name, int *blk, int *chunk, const char **rest) {
    const char *p;
    if (layout == VIT_LAYOUT_HF) {
        if (strncmp(name, "encoder.layer.", 14)) return 0;
        p = name + 14;
    } else {
        if (strncmp(name, "blocks.", 7)) return 0;
        p = name + 7;
    }
    if (!isdigit((unsigned char)*p)) return 0;
    char *end;
    long a = strtol(p, &end, 10);
    if (*end != '.' || a > 100000) return 0;
    *chunk = -1;
    if (chunked) {
        if (!isdigit((unsigned char)end[1])) return 0;
        long b = strtol(end + 1, &end, 10);
        if (*end != '.' || b > 100000) return 0;
        *chunk = (int)a;
        a = b;
    }
    *blk = (int)a;
    *rest = end + 1;
    return 1;
}

/* canonical name and part of a file name (prefix stripped) in a layout; 0 when unknown */
static int map_name(int layout, int chunked, const char *name, char *canon, size_t n, int *part, int *blk_chunk,
                    int *swiglu) {
    int bit = 1 << layout;
    for (int i = 0; i < NTOP; i++)
        if ((TOP[i].layouts & bit) && !strcmp(name, TOP[i].file)) {
            snprintf(canon, n, "%s", TOP[i].canon);
            *part = TOP[i].part;
            return 1;
        }
    int blk, chunk;
    const char *rest;
    if (!split_block(layout, chunked, name, &blk, &chunk, &rest)) return 0;
    for (int i = 0; i < NBLOCK; i++)
        if ((BLOCK[i].layouts & bit) && !strcmp(rest, BLOCK[i].file)) {
            snprintf(canon, n, "blocks.%d.%s", blk, BLOCK[i].canon);
            *part = BLOCK[i].part;
            *blk_chunk = chunk;
            if (BLOCK[i].swiglu == 1) *swiglu = 1;
            return 1;
        }
    return 0;
}

int vit_layout_name_of(int layout, const char *canon, int part, int swiglu, char *out, size_t n) {
    int bit = 1 << layout;
    for (int i = 0; i < NTOP; i++)
        if ((TOP[i].layouts & bit) && TOP[i].part == part && !strcmp(canon, TOP[i].canon)) {
            snprintf(out, n, "%s", TOP[i].file);
            return 1;
        }
    int blk;
    char *end;
    if (strncmp(canon, "blocks.", 7) || !isdigit((unsigned char)canon[7])) return 0;
    blk = (int)strtol(canon + 7, &end, 10);
    if (*end != '.') return 0;
    for (int i = 0; i < NBLOCK; i++)
        if ((BLOCK[i].layouts & bit) && BLOCK[i].part == part && !strcmp(end + 1, BLOCK[i].canon) &&
            (BLOCK[i].swiglu < 0 || BLOCK[i].swiglu == (swiglu != 0))) {
            snprintf(out, n, layout == VIT_LAYOUT_HF ? "encoder.layer.%d.%s" : "blocks.%d.%s", blk, BLOCK[i].file);
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------------- recognising a file */

static const char *const PREFIXES[] = {
    "", "module.", "backbone.", "module.backbone.", "teacher.", "teacher.backbone.", "teacher.module.backbone.",
    "student.", "student.backbone.", "student.module.", "student.module.backbone.", "dinov2.", "dinov2_with_registers.",
};
#define NPREFIXES (int)(sizeof PREFIXES / sizeof *PREFIXES)

static int has(const st_file *f, const char *a, const char *b) {
    char name[512];
    snprintf(name, sizeof name, "%s%s", a, b);
    return st_find(f, name) != NULL;
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* tensors a layout leaves out on purpose: name relative to the backbone prefix, and `outer` (the
 * prefix without its trailing backbone./module. parts) for heads that sit beside the backbone */
static int dropped(int layout, const char *full, const char *rel, const char *outer_rel) {
    switch (layout) {
    case VIT_LAYOUT_META: return rel && !strcmp(rel, "mask_token");
    case VIT_LAYOUT_HF: /* Dinov2ForImageClassification: dinov2.* beside classifier.* */
        return (rel && !strcmp(rel, "embeddings.mask_token")) || starts(full, "classifier.");
    case VIT_LAYOUT_MAE: return rel && (!strcmp(rel, "mask_token") || starts(rel, "decoder_"));
    case VIT_LAYOUT_TIMM: return rel && (!strcmp(rel, "head.weight") || !strcmp(rel, "head.bias"));
    case VIT_LAYOUT_DINOV1: return (rel && starts(rel, "head.")) || (outer_rel && starts(outer_rel, "head."));
    default: return 0;
    }
}

static int detect(const st_file *f, const char *base, vit_tensors *v) {
    if (st_meta(f, "endoret.vit.dim")) {
        v->layout = VIT_LAYOUT_ENDORET;
        snprintf(v->prefix, sizeof v->prefix, "%s", base);
        return ER_OK;
    }
    int found = -1;
    char full[128];
    for (int i = 0; i < NPREFIXES; i++) {
        snprintf(full, sizeof full, "%s%s", base, PREFIXES[i]);
        if (!has(f, full, "patch_embed.proj.weight") && !has(f, full, "embeddings.patch_embeddings.projection.weight")) continue;
        if (found >= 0)
            return er_fail(ER_INPUT, "%s: two ViTs, under '%s' and '%s' (a DINO checkpoint with teacher and student?): "
                           "extract one first", f->path, v->prefix, full);
        found = i;
        snprintf(v->prefix, sizeof v->prefix, "%s", full);
    }
    if (found < 0)
        return er_fail(ER_INPUT, "%s: no ViT here ('%spatch_embed.proj.weight' or "
                       "'%sembeddings.patch_embeddings.projection.weight' missing)", f->path, base, base);
    const char *P = v->prefix, *pre = PREFIXES[found];
    if (has(f, P, "embeddings.patch_embeddings.projection.weight")) v->layout = VIT_LAYOUT_HF;
    else if (*pre && strcmp(pre, "dinov2.") && strcmp(pre, "dinov2_with_registers.")) v->layout = VIT_LAYOUT_DINOV1;
    else {
        int decoder = 0, meta = has(f, P, "register_tokens") || has(f, P, "mask_token") || has(f, P, "blocks.0.0.norm1.weight");
        for (int i = 0; i < f->n; i++) {
            const char *nm = f->tensors[i].name;
            if (starts(nm, P) && starts(nm + strlen(P), "decoder_")) decoder = 1;
            if (starts(nm, P) && strstr(nm, ".mlp.w12.")) meta = 1;
        }
        v->layout = decoder ? VIT_LAYOUT_MAE : meta ? VIT_LAYOUT_META : VIT_LAYOUT_TIMM;
        if (!decoder && !meta && (has(f, base, "head.last_layer.weight_v") || has(f, base, "head.mlp.0.weight")))
            v->layout = VIT_LAYOUT_DINOV1;
    }
    if (v->layout == VIT_LAYOUT_META && has(f, P, "blocks.0.0.norm1.weight")) {
        char name[160];
        while (snprintf(name, sizeof name, "%sblocks.0.%d.norm1.weight", P, v->chunk), st_find(f, name)) v->chunk++;
    }
    return ER_OK;
}

/* ---------------------------------------------------------------- mapping */

static vit_tensor *entry(vit_tensors *v, const char *canon) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->t[i].name, canon)) return &v->t[i];
    v->t = xrealloc(v->t, sizeof *v->t * (size_t)(v->n + 1));
    vit_tensor *t = &v->t[v->n++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(canon);
    return t;
}

static void shape_str(int ndim, const int64_t *s, char *buf, size_t n) {
    size_t l = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && l < n; d++) l += (size_t)snprintf(buf + l, n - l, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (l < n) snprintf(buf + l, n - l, "]");
}

void vit_tensors_file_name(const vit_tensors *v, const char *canon, char *out, size_t n) {
    char name[256];
    if (!vit_layout_name_of(v->layout, canon, 0, v->swiglu_names, name, sizeof name)) snprintf(name, sizeof name, "%s", canon);
    if (v->chunk > 0 && !strncmp(name, "blocks.", 7)) {
        char *end;
        long b = strtol(name + 7, &end, 10);
        snprintf(out, n, "%sblocks.%ld.%ld%s", v->prefix, b / v->chunk, b, end);
        return;
    }
    snprintf(out, n, "%s%s", v->prefix, name);
}

int vit_tensors_open(const st_file *f, const char *prefix, int strict, vit_tensors *v) {
    memset(v, 0, sizeof *v);
    v->f = f;
    int rc = detect(f, prefix ? prefix : "", v);
    if (rc) return rc;
    const char *P = v->prefix;
    size_t np = strlen(P);
    /* the outer prefix: P without trailing backbone./module. (where a DINO head sits) */
    char outer[128];
    snprintf(outer, sizeof outer, "%s", P);
    for (int again = 1; again;) {
        again = 0;
        size_t lo = strlen(outer);
        if (lo >= 9 && !strcmp(outer + lo - 9, "backbone.")) outer[lo - 9] = 0, again = 1;
        else if (lo >= 7 && !strcmp(outer + lo - 7, "module.")) outer[lo - 7] = 0, again = 1;
    }
    size_t no = strlen(outer);
    for (int i = 0; i < f->n; i++) {
        const st_tensor *ft = &f->tensors[i];
        const char *rel = starts(ft->name, P) ? ft->name + np : NULL;
        const char *orel = starts(ft->name, outer) ? ft->name + no : NULL;
        char canon[256];
        int part = 0, chunk = -1;
        if (rel && map_name(v->layout, v->chunk > 0, rel, canon, sizeof canon, &part, &chunk, &v->swiglu_names)) {
            if (v->chunk > 0 && chunk >= 0) {
                int blk = atoi(canon + 7);
                if (chunk != blk / v->chunk) {
                    rc = er_fail(ER_INPUT, "%s: '%s': block %d in chunk %d, expected chunk %d (%d blocks per chunk)",
                                 f->path, ft->name, blk, chunk, blk / v->chunk, v->chunk);
                    break;
                }
            }
            vit_tensor *t = entry(v, canon);
            if (t->part[part]) {
                rc = er_fail(ER_INPUT, "%s: both '%s' and '%s' are '%s': which one the model uses is ambiguous", f->path,
                             t->part[part]->name, ft->name, canon);
                break;
            }
            t->part[part] = ft;
            if (part + 1 > t->nparts) t->nparts = part + 1;
            continue;
        }
        if (v->layout == VIT_LAYOUT_ENDORET || !strict) continue;
        if (dropped(v->layout, ft->name, rel, orel)) {
            v->dropped = xrealloc(v->dropped, sizeof(char *) * (size_t)(v->ndropped + 1));
            v->dropped[v->ndropped++] = ft->name;
            continue;
        }
        rc = er_fail(ER_INPUT, "%s: tensor '%s' is not part of a %s ViT (strict: a file is loaded whole or not at all)",
                     f->path, ft->name, LABELS[v->layout]);
        break;
    }
    /* HF's q, k, v: all three, one shape, stacked along dim 0 */
    for (int i = 0; !rc && i < v->n; i++) {
        vit_tensor *t = &v->t[i];
        if (t->nparts == 1 && t->part[0]) {
            t->ndim = t->part[0]->ndim;
            memcpy(t->shape, t->part[0]->shape, sizeof t->shape);
            t->numel = t->part[0]->numel;
            continue;
        }
        static const char *const QKV[3] = {"query", "key", "value"};
        for (int p = 0; p < 3 && !rc; p++) {
            if (!t->part[p]) {
                char b[96];
                int blk = atoi(t->name + 7);
                snprintf(b, sizeof b, "%sencoder.layer.%d.attention.attention.%s.%s", P, blk, QKV[p],
                         strstr(t->name, "weight") ? "weight" : "bias");
                rc = er_fail(ER_INPUT, "%s: '%s' missing (query, key and value are stacked into %s)", f->path, b, t->name);
            } else if (p && (t->part[p]->ndim != t->part[0]->ndim ||
                             memcmp(t->part[p]->shape, t->part[0]->shape, sizeof(int64_t) * (size_t)t->part[0]->ndim))) {
                char a[64], b[64];
                shape_str(t->part[0]->ndim, t->part[0]->shape, a, sizeof a);
                shape_str(t->part[p]->ndim, t->part[p]->shape, b, sizeof b);
                rc = er_fail(ER_INPUT, "%s: '%s' has shape %s, '%s' %s: they are stacked into %s", f->path,
                             t->part[p]->name, b, t->part[0]->name, a, t->name);
            }
        }
        if (rc) break;
        t->ndim = t->part[0]->ndim;
        memcpy(t->shape, t->part[0]->shape, sizeof t->shape);
        t->shape[0] *= 3;
        t->numel = 3 * t->part[0]->numel;
    }
    if (rc) vit_tensors_free(v);
    return rc;
}

void vit_tensors_free(vit_tensors *v) {
    for (int i = 0; i < v->n; i++) free(v->t[i].name);
    free(v->t);
    free(v->dropped);
    v->t = NULL;
    v->dropped = NULL;
    v->n = v->ndropped = 0;
}

const vit_tensor *vit_tensors_find(const vit_tensors *v, const char *canon) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->t[i].name, canon)) return &v->t[i];
    return NULL;
}

int vit_tensors_read(const vit_tensors *v, const vit_tensor *t, float *dst) {
    int64_t off = 0;
    for (int p = 0; p < t->nparts; p++) {
        int rc = st_read_f32(v->f, t->part[p]->name, dst + off, t->part[p]->numel);
        if (rc) return rc;
        off += t->part[p]->numel;
    }
    return ER_OK;
}
