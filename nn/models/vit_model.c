/* vit_model.c — the ViT family of the model registry: keys, create, files, the [CLS] descriptor. */
#include "nn/models/vit_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/models/pos_interp.h"
#include "nn/models/vit_io.h"
#include "nn/models/vit_memory.h"
#include "nn/ops.h"

/* ---------------------------------------------------------------- config keys */

void vit_args_defaults(vit_args *a) {
    memset(a, 0, sizeof *a);
    cfg_set_str(&a->arch, "vit_large");
    a->img = 224;
    a->patch = 16;
}

const cfg_spec *vit_args_keys(vit_args *a, int *n) {
    static __thread cfg_spec s[9];
    int k = 0;
#define K(key, type, field, range, help) s[k++] = (cfg_spec){key, type, &a->field, help, range}
    K("model.arch", CFG_STR, arch, "vit_tiny|vit_small|vit_base|vit_large|vit_giant|vit_tiny_patch14|vit_small_patch14|vit_base_patch14|vit_large_patch14|vit_giant_patch14|vit_tiny_patch16|vit_small_patch16|vit_base_patch16|vit_large_patch16|vit_giant_patch16", "vit_tiny | vit_small | vit_base | vit_large | vit_giant (+ _patch14/_patch16)");
    K("model.img", CFG_INT, img, "[8, 4096]", "training image side");
    K("model.patch", CFG_INT, patch, "[2, 64]", "patch size");
    K("model.dim", CFG_INT, dim, "[0, 8192]", "override the width (0 = the arch's)");
    K("model.depth", CFG_INT, depth, "[0, 256]", "override the depth (0 = the arch's)");
    K("model.heads", CFG_INT, heads, "[0, 256]", "override the heads (0 = the arch's)");
    K("model.registers", CFG_INT, registers, "[0, 64]", "register tokens");
    K("model.layerscale", CFG_DOUBLE, layerscale, "[0, inf)", "LayerScale init (0 = off)");
    K("model.pos_learned", CFG_BOOL, pos_learned, NULL, "learned pos-embed instead of fixed 2-D sin-cos");
#undef K
    *n = k;
    return s;
}

void vit_args_free(vit_args *a) {
    free(a->arch);
    a->arch = NULL;
}

int vit_args_config(const vit_args *a, vit_config *v) {
    if (vit_config_preset(a->arch, v)) return ER_INPUT;
    v->img = a->img;
    if (a->patch > 0) v->patch = a->patch;
    if (a->dim > 0) v->dim = a->dim;
    if (a->depth > 0) v->depth = a->depth;
    if (a->heads > 0) v->heads = a->heads;
    v->registers = a->registers;
    v->pos_prefix = 1;
    v->layerscale = a->layerscale;
    v->pos_fixed = !a->pos_learned;
    return vit_config_check(v);
}

/* ---------------------------------------------------------------- the model */

model *vit_model_wrap(vit *v) {
    model *m = xcalloc(1, sizeof *m);
    m->arch = &vit_arch;
    m->impl = v;
    m->params = &v->params;
    m->dim = v->cfg.dim;
    m->img = v->cfg.img;
    m->device = v->patch_w->device;
    return m;
}

vit *vit_model_vit(const model *m) { return m && m->arch == &vit_arch ? m->impl : NULL; }

vit *vit_model_take(model *m) {
    vit *v = vit_model_vit(m);
    if (v) free(m);
    return v;
}

static int accepts(const char *arch) {
    vit_config c;
    if (strncmp(arch, "vit_", 4)) return 0;
    int ok = vit_config_preset(arch, &c) == ER_OK;
    er_clear();
    return ok;
}

static void args_defaults(void *a) { vit_args_defaults(a); }
static const cfg_spec *keys(void *a, int *n) { return vit_args_keys(a, n); }
static void args_free(void *a) { vit_args_free(a); }

static int create(const void *args, uint64_t seed, model **out) {
    vit_config c;
    int rc = vit_args_config(args, &c);
    if (rc) return rc;
    vit *v = vit_new(&c, seed);
    if (!v) return ER_INPUT;
    *out = vit_model_wrap(v);
    return ER_OK;
}

/* ours, or a patch embedding of any layout of nn/models/vit_layouts.h (under any prefix): what else
 * is wrong with the file, load says */
static int recognises(const st_file *f) {
    if (st_meta(f, "endoret.vit.dim")) return 1;
    for (int i = 0; i < f->n; i++) {
        const char *n = f->tensors[i].name;
        size_t l = strlen(n);
        if ((l >= 23 && !strcmp(n + l - 23, "patch_embed.proj.weight")) ||
            (l >= 45 && !strcmp(n + l - 45, "embeddings.patch_embeddings.projection.weight")))
            return 1;
    }
    return 0;
}

/* The heads a file cannot say (unless it is ours): --arch's preset (whose width must match) or model.heads. */
static int apply_overrides(const st_file *f, const char *arch, char **sets, int nsets, vit_config *c) {
    if (arch && !st_meta(f, "endoret.vit.heads")) {
        vit_config p;
        if (vit_config_preset(arch, &p)) return ER_INPUT; /* model_load checked the name */
        if (p.dim != c->dim) return er_fail(ER_INPUT, "%s: width %d, but %s is %d wide", f->path, c->dim, arch, p.dim);
        c->heads = p.heads;
    }
    int heads = 0;
    char *rule = NULL; /* the position-table rule, when the layout cannot tell (a bare DINO v1 backbone has timm's names) */
    cfg_spec k[2] = {{"model.heads", CFG_INT, &heads, "", "[1, 256]"},
                     {"model.pos_interp", CFG_STR, &rule, "", "bicubic|bicubic_aa|bicubic_offset"}};
    int rc = ER_OK;
    for (int i = 0; i < nsets && !rc; i++) {
        if (strncmp(sets[i], "model.heads=", 12) && strncmp(sets[i], "model.pos_interp=", 17))
            rc = er_fail(ER_INPUT, "%s: '%s': a ViT file fixes everything but model.heads and model.pos_interp", f->path, sets[i]);
        else rc = cfg_set(sets[i], f->path, k, 2);
    }
    if (!rc && heads > 0) {
        if (c->dim % heads) rc = er_fail(ER_INPUT, "%s: model.heads=%d does not divide the width %d", f->path, heads, c->dim);
        else c->heads = heads;
    }
    if (!rc && rule) c->pos_interp = pos_interp_rule(rule); /* the range above checked the name */
    free(rule);
    return rc;
}

static int load(const st_file *f, const char *arch, char **sets, int nsets, model **out) {
    vit_tensors t; /* strict: every tensor of the file is the ViT's or a known leftover (a head, mask_token) */
    if (vit_tensors_open(f, "", 1, &t)) return ER_INPUT;
    vit *v = vit_load_tensors(&t, 1);
    vit_tensors_free(&t);
    if (!v) return ER_INPUT;
    int rc = apply_overrides(f, arch, sets, nsets, &v->cfg); /* heads: used by the forward only */
    if (rc) {
        vit_free(v);
        return rc;
    }
    *out = vit_model_wrap(v);
    return ER_OK;
}

static tensor *descriptor(model *m, const nn_ctx *ctx, const float *images, int B) {
    return op_l2_normalize(vit_cls(m->impl, ctx, images, B), -1, 1e-12f);
}

static int set_img(model *m, int img) {
    int rc = vit_set_img(m->impl, img);
    if (!rc) m->img = img;
    return rc;
}

static double forward_flops(const model *m, int B) {
    const vit *v = m->impl;
    return vit_forward_flops(&v->cfg, B, 1 + v->cfg.registers + v->L);
}

static double forward_bytes(const model *m, int B) {
    const vit *v = m->impl;
    return vit_forward_bytes(&v->cfg, B, 1 + v->cfg.registers + v->L, m->img);
}

static void describe(const model *m, char *buf, size_t n) {
    const vit_config *c = &((const vit *)m->impl)->cfg;
    snprintf(buf, n, "endofinder vit dim %d depth %d patch %d img %d: %s", c->dim, c->depth, c->patch, c->img,
             m->arch->what);
}

static void add_meta(const model *m, st_writer *w) { vit_config_add_meta(&((const vit *)m->impl)->cfg, w); }

static void destroy(model *m) { vit_free(m->impl); }

const model_arch vit_arch = {
    .name = "vit",
    .variants = "vit_tiny | vit_small | vit_base | vit_large | vit_giant (+ _patch14/_patch16)",
    .help = "Vision Transformer (timm names; timm, MAE, Meta DINOv2, Hugging Face, DINO v1 files load)",
    .what = "L2-normalised [CLS]",
    .accepts = accepts,
    .args_size = sizeof(vit_args),
    .args_defaults = args_defaults,
    .keys = keys,
    .args_free = args_free,
    .create = create,
    .recognises = recognises,
    .load = load,
    .descriptor = descriptor,
    .set_img = set_img,
    .forward_flops = forward_flops,
    .forward_bytes = forward_bytes,
    .describe = describe,
    .add_meta = add_meta,
    .destroy = destroy,
};
