/* dual_model.c — the dual-backbone family of the model registry (dual_model.h). */
#include "nn/models/dual_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/base/base.h"
#include "nn/models/vit_io.h"
#include "nn/models/vit_lora.h"
#include "nn/models/vit_memory.h"
#include "nn/ops.h"

/* ---------------------------------------------------------------- keys */

void dual_args_defaults(dual_args *a) {
    memset(a, 0, sizeof *a);
    cfg_set_str(&a->arch, "dual_backbone");
    a->img = 224;
    cfg_set_str(&a->branches, "both");
    cfg_set_str(&a->pool, "cls");
    a->embed_dim = 512;
    a->lora_r = 8; a->lora_alpha = 16; a->lora_dropout = 0.05;
    cfg_set_str(&a->gastronet, "");
    cfg_set_str(&a->dinov2, "");
    cfg_set_str(&a->gastronet_arch, "vit_small_patch16");
    cfg_set_str(&a->dinov2_arch, "vit_small_patch14");
    a->dinov2_registers = 4;
}

const cfg_spec *dual_args_keys(dual_args *a, int *n) {
    static __thread cfg_spec s[16];
    int k = 0;
#define K(key, type, field, range, help) s[k++] = (cfg_spec){key, type, &a->field, help, range}
    K("model.arch", CFG_STR, arch, "dual_backbone", "dual_backbone (GastroNet ViT-S/16 + DINOv2 ViT-S/14 reg4, LoRA, fusion)");
    K("model.img", CFG_INT, img, "[14, 4096]", "image side (a multiple of both patches: 224 in the paper)");
    K("dual.branches", CFG_STR, branches, "both|gastronet|dinov2", "both (fusion) | gastronet | dinov2 (single-backbone rows)");
    K("dual.pool", CFG_STR, pool, "cls|gem|mean", "branch descriptor: cls (the reference) | gem | mean of the patch tokens");
    K("dual.embed_dim", CFG_INT, embed_dim, "[0, 8192]", "fusion head output (512; 0 = no head, one branch only)");
    K("dual.lora_r", CFG_INT, lora_r, "[0, 1024]", "LoRA rank (8; 0 = no adapters: frozen backbones, head only)");
    K("dual.lora_alpha", CFG_DOUBLE, lora_alpha, "(0, inf)", "LoRA alpha (scale alpha / r)");
    K("dual.lora_dropout", CFG_DOUBLE, lora_dropout, "[0, 1)", "dropout on the LoRA input");
    K("dual.gastronet", CFG_STR, gastronet, "path", "GastroNet ViT-S/16 weights (safetensors, timm/DINO names; '' = random init)");
    K("dual.dinov2", CFG_STR, dinov2, "path", "DINOv2 ViT-S/14 reg4 weights (Meta or timm names; '' = random init)");
    K("dual.gastronet_arch", CFG_STR, gastronet_arch, "text", "preset of a random GastroNet branch (vit_small_patch16)");
    K("dual.dinov2_arch", CFG_STR, dinov2_arch, "text", "preset of a random DINOv2 branch (vit_small_patch14)");
    K("dual.depth", CFG_INT, depth, "[0, 256]", "depth of random branches (0 = the preset's)");
    K("dual.dinov2_registers", CFG_INT, dinov2_registers, "[0, 64]", "register tokens of a random DINOv2 branch");
#undef K
    *n = k;
    return s;
}

void dual_args_free(dual_args *a) {
    int n;
    const cfg_spec *s = dual_args_keys(a, &n);
    cfg_free_strings(s, n);
}

/* ---------------------------------------------------------------- wrapping */

static model *wrap(dual_net *d, int img) {
    model *m = xcalloc(1, sizeof *m);
    m->arch = &dual_arch;
    m->impl = d;
    m->params = &d->params;
    m->dim = dual_out_dim(d);
    m->img = img;
    m->device = d->params.n ? d->params.t[0]->device : DEV_CPU;
    return m;
}

dual_net *dual_model_net(const model *m) { return m && m->arch == &dual_arch ? m->impl : NULL; }

static int args_config(const dual_args *a, dual_config *c) {
    memset(c, 0, sizeof *c);
    int rc = dual_branches_parse(a->branches, "dual.branches", &c->branches);
    if (!rc) rc = pool_parse(a->pool, "dual.pool", &c->pool);
    if (rc) return rc;
    c->embed_dim = a->embed_dim;
    c->lora = (lora_config){a->lora_r, a->lora_alpha, a->lora_dropout};
    c->gem_eps = 1e-6f;
    if (c->embed_dim == 0 && c->branches == DUAL_BOTH)
        return er_fail(ER_INPUT, "dual.embed_dim = 0 (no head) needs dual.branches = gastronet or dinov2");
    if (a->lora_r > 0 && !(a->lora_alpha > 0)) return er_fail(ER_INPUT, "dual.lora_alpha must be > 0");
    if (!(a->lora_dropout >= 0 && a->lora_dropout < 1)) return er_fail(ER_INPUT, "dual.lora_dropout must be in [0, 1)");
    return ER_OK;
}

/* a random branch: the preset with the reference's layout (learned positions; DINOv2: registers, LayerScale 1) */
static vit *random_branch(const dual_args *a, int i, uint64_t seed) {
    vit_config c;
    const char *preset = i == 0 ? a->gastronet_arch : a->dinov2_arch;
    char why[512];
    if (vit_config_preset(preset, &c)) {
        snprintf(why, sizeof why, "%s", er_msg());
        er_fail(ER_INPUT, "dual.%s_arch: %s", dual_branch_name[i], why);
        return NULL;
    }
    c.img = a->img;
    c.pos_fixed = 0;
    if (a->depth > 0) c.depth = a->depth;
    if (i == 1) { c.registers = a->dinov2_registers; c.layerscale = 1.0; }
    if (vit_config_check(&c)) {
        snprintf(why, sizeof why, "%s", er_msg());
        er_fail(ER_INPUT, "dual.%s_arch = %s at model.img = %d: %s", dual_branch_name[i], preset, a->img, why);
        return NULL;
    }
    return vit_new(&c, seed + 1000003ull * (i + 1));
}

static int create(const void *args, uint64_t seed, model **out) {
    const dual_args *a = args;
    dual_config c;
    int rc = args_config(a, &c);
    if (rc) return rc;
    vit *v[DUAL_NBRANCH] = {0};
    for (int i = 0; i < DUAL_NBRANCH && !rc; i++) {
        if (!((c.branches >> i) & 1)) continue;
        const char *file = i == 0 ? a->gastronet : a->dinov2;
        if (file && file[0]) {
            v[i] = dual_branch_load(file, a->img);
            if (!v[i]) { /* the message names the file; say which key gave it */
                char why[1024];
                snprintf(why, sizeof why, "%s", er_msg());
                rc = er_fail(ER_INPUT, "dual.%s: %s", dual_branch_name[i], why);
                break;
            }
            fprintf(stderr, "dual: %s branch from %s (dim %d, depth %d, patch %d, %d registers)\n", dual_branch_name[i],
                    file, v[i]->cfg.dim, v[i]->cfg.depth, v[i]->cfg.patch, v[i]->cfg.registers);
        } else {
            v[i] = random_branch(a, i, seed);
            if (!v[i]) { rc = ER_INPUT; break; }
            fprintf(stderr, "dual: %s branch: no weights file (dual.%s unset): RANDOM init (%s, depth %d)\n",
                    dual_branch_name[i], dual_branch_name[i], i == 0 ? a->gastronet_arch : a->dinov2_arch, v[i]->cfg.depth);
        }
    }
    if (rc) {
        for (int i = 0; i < DUAL_NBRANCH; i++) vit_free(v[i]);
        return rc;
    }
    dual_net *d = dual_new(&c, v, seed);
    if (!d) return ER_INPUT;
    *out = wrap(d, a->img);
    return ER_OK;
}

/* ---------------------------------------------------------------- files */

static int recognises(const st_file *f) {
    return st_find(f, "fusion.0.weight") && (st_find(f, "gastronet.patch_embed.proj.weight") ||
                                             st_find(f, "dinov2.patch_embed.proj.weight"));
}

static int meta_int(const st_file *f, const char *key, int def) {
    const char *s = st_meta(f, key);
    return s ? atoi(s) : def;
}

static int load(const st_file *f, const char *arch, char **sets, int nsets, model **out) {
    (void)arch;
    if (nsets) return er_fail(ER_INPUT, "%s: a dual_backbone file fixes every key ('%s')", f->path, sets[0]);
    dual_config c = {0};
    const char *s;
    int rc = ER_OK;
    c.branches = 0;
    for (int i = 0; i < DUAL_NBRANCH; i++) {
        char n[96];
        snprintf(n, sizeof n, "%s.patch_embed.proj.weight", dual_branch_name[i]);
        if (st_find(f, n)) c.branches |= 1 << i;
    }
    if ((s = st_meta(f, "endoret.dual.pool")) && (rc = pool_parse(s, "endoret.dual.pool", &c.pool))) return rc;
    if (!s && st_find(f, "gastronet.gem_p")) c.pool = POOL_GEM;
    const st_tensor *hw = st_find(f, "fusion.0.weight");
    c.embed_dim = hw ? (int)hw->shape[0] : 0;
    c.lora.r = meta_int(f, "endoret.dual.lora_r", 0);
    c.lora.alpha = (s = st_meta(f, "endoret.dual.lora_alpha")) ? atof(s) : 16;
    c.lora.dropout = (s = st_meta(f, "endoret.dual.lora_dropout")) ? atof(s) : 0;
    c.gem_eps = 1e-6f;
    vit *v[DUAL_NBRANCH] = {0};
    int img = meta_int(f, "endoret.dual.img", 0);
    for (int i = 0; i < DUAL_NBRANCH && !rc; i++) {
        if (!((c.branches >> i) & 1)) continue;
        char prefix[32], key[64];
        snprintf(prefix, sizeof prefix, "%s.", dual_branch_name[i]);
        vit_config vc;
        if ((rc = vit_config_from_st(f, prefix, &vc))) break;
        snprintf(key, sizeof key, "endoret.dual.%s.heads", dual_branch_name[i]);
        vc.heads = meta_int(f, key, vc.heads);
        if (img > 0) vc.img = img;
        if ((rc = vit_config_check(&vc))) break;
        if (!(v[i] = vit_new(&vc, 0))) rc = ER_INPUT;
    }
    if (!c.branches) rc = er_fail(ER_INPUT, "%s: no gastronet.* or dinov2.* branch", f->path);
    if (rc) {
        for (int i = 0; i < DUAL_NBRANCH; i++) vit_free(v[i]);
        return rc;
    }
    dual_net *d = dual_new(&c, v, 0);
    if (!d) return ER_INPUT;
    rc = params_load_st(&d->params, f, "", 1);
    for (int i = 0; !rc && i < f->n; i++)
        if (!params_find(&d->params, f->tensors[i].name))
            rc = er_fail(ER_INPUT, "%s: unexpected tensor '%s' for a dual_backbone (%s branches, pool %s, lora_r %d)",
                         f->path, f->tensors[i].name, dual_branches_name(c.branches), pool_name(c.pool), c.lora.r);
    if (rc) {
        dual_free(d);
        return rc;
    }
    *out = wrap(d, d->v[0] ? d->v[0]->cfg.img : d->v[1]->cfg.img);
    return ER_OK;
}

static void add_meta(const model *m, st_writer *w) {
    const dual_net *d = m->impl;
    char b[64];
    st_add_meta(w, "endoret.arch", "dual_backbone");
    st_add_meta(w, "endoret.dual.branches", dual_branches_name(d->cfg.branches));
    st_add_meta(w, "endoret.dual.pool", pool_name(d->cfg.pool));
    snprintf(b, sizeof b, "%d", d->cfg.embed_dim); st_add_meta(w, "endoret.dual.embed_dim", b);
    snprintf(b, sizeof b, "%d", d->cfg.lora.r); st_add_meta(w, "endoret.dual.lora_r", b);
    snprintf(b, sizeof b, "%.17g", d->cfg.lora.alpha); st_add_meta(w, "endoret.dual.lora_alpha", b);
    snprintf(b, sizeof b, "%.17g", d->cfg.lora.dropout); st_add_meta(w, "endoret.dual.lora_dropout", b);
    snprintf(b, sizeof b, "%d", m->img); st_add_meta(w, "endoret.dual.img", b);
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i]) {
            char key[64];
            snprintf(key, sizeof key, "endoret.dual.%s.heads", dual_branch_name[i]);
            snprintf(b, sizeof b, "%d", d->v[i]->cfg.heads);
            st_add_meta(w, key, b);
        }
}

int dual_model_save_merged(const model *m, const char *path, int64_t step) {
    const dual_net *d = m->impl;
    vit *v[DUAL_NBRANCH] = {0};
    int rc = ER_OK;
    for (int i = 0; i < DUAL_NBRANCH && !rc; i++)
        if (d->v[i] && !(v[i] = vit_lora_merged_copy(d->v[i])))
            rc = ER_RUNTIME;
    if (rc) {
        for (int i = 0; i < DUAL_NBRANCH; i++) vit_free(v[i]);
        return rc;
    }
    dual_config c = d->cfg;
    c.lora.r = 0;
    dual_net *e = dual_new(&c, v, 0);
    if (!e) return ER_RUNTIME;
    for (int i = 0; i < e->own.n && !rc; i++) { /* head and GeM p: copied by name */
        tensor *src = params_find(&d->params, e->own.t[i]->name);
        if (!src) { rc = er_fail(ER_RUNTIME, "dual export: no '%s'", e->own.t[i]->name); break; }
        float *h = xmalloc((size_t)tensor_numel(src) * sizeof(float));
        tensor_to_host(src, h);
        tensor_copy_from_host(e->own.t[i], h);
        free(h);
    }
    if (!rc) {
        model *mm = wrap(e, m->img);
        rc = model_save(mm, path, step);
        free(mm);
    }
    dual_free(e);
    return rc;
}

/* ---------------------------------------------------------------- instance */

static tensor *descriptor(model *m, const nn_ctx *ctx, const float *images, int B) {
    tensor *x = tensor_upload(m->device, 4, SHAPE(B, 3, m->img, m->img), images);
    return dual_forward(m->impl, ctx, x);
}

static int set_img(model *m, int img) {
    dual_net *d = m->impl;
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i]) {
            vit_config c = d->v[i]->cfg;
            c.img = img;
            if (vit_config_check(&c)) return ER_INPUT;
        }
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i] && vit_set_img(d->v[i], img)) return ER_INPUT;
    m->img = img;
    return ER_OK;
}

/* the branches run one after the other: the larger forward is the peak */
static double forward_bytes(const model *m, int B) {
    const dual_net *d = m->impl;
    double most = 0;
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i]) {
            const vit *v = d->v[i];
            double b = vit_forward_bytes(&v->cfg, B, 1 + v->cfg.registers + v->L, m->img);
            if (b > most) most = b;
        }
    return most;
}

static double forward_flops(const model *m, int B) {
    const dual_net *d = m->impl;
    double f = 0;
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i]) {
            const vit *v = d->v[i];
            f += vit_forward_flops(&v->cfg, B, 1 + v->cfg.registers + v->L);
            if (v->loras) /* adapters: r (in + out) multiply-adds per token and module */
                for (int j = 0; j < v->nlora; j++)
                    f += 2.0 * B * (j == 0 ? v->L : 1 + v->cfg.registers + v->L) * v->loras[j].r *
                         (double)(v->loras[j].in + v->loras[j].out);
        }
    if (d->has_head) f += 2.0 * B * d->head.in * d->head.out;
    return f;
}

static void describe(const model *m, char *buf, size_t n) {
    const dual_net *d = m->impl;
    size_t k = (size_t)snprintf(buf, n, "dual_backbone %s, pool %s, lora r %d, head %d:", dual_branches_name(d->cfg.branches),
                                pool_name(d->cfg.pool), d->cfg.lora.r, d->cfg.embed_dim);
    for (int i = 0; i < DUAL_NBRANCH && k < n; i++)
        if (d->v[i])
            k += (size_t)snprintf(buf + k, n - k, " %s vit dim %d depth %d patch %d reg %d;", dual_branch_name[i],
                                  d->v[i]->cfg.dim, d->v[i]->cfg.depth, d->v[i]->cfg.patch, d->v[i]->cfg.registers);
    if (k < n) snprintf(buf + k, n - k, " %s", m->arch->what);
}

static int accepts(const char *arch) { return !strcmp(arch, "dual_backbone"); }
static void args_defaults(void *a) { dual_args_defaults(a); }
static const cfg_spec *keys(void *a, int *n) { return dual_args_keys(a, n); }
static void args_free(void *a) { dual_args_free(a); }
static void destroy(model *m) { dual_free(m->impl); }

const model_arch dual_arch = {
    .name = "dual_backbone",
    .variants = "dual_backbone",
    .help = "GastroNet ViT-S/16 + DINOv2 ViT-S/14 reg4 with LoRA and a fusion head (dual-backbone paper)",
    .what = "L2-normalised fused embedding",
    .accepts = accepts,
    .args_size = sizeof(dual_args),
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
