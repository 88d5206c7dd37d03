/* vit_io.c — a ViT from a safetensors file: config from metadata / tensor shapes, weights. */
#include "nn/models/vit_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/params_st.h"
#include "nn/base/base.h"

static int meta_int(const st_file *f, const char *key, int *out) {
    const char *s = st_meta(f, key);
    if (!s) return 0;
    *out = atoi(s);
    return 1;
}

void vit_config_add_meta(const vit_config *c, st_writer *w) {
    char buf[64];
#define M(key, fmt, val) (snprintf(buf, sizeof buf, fmt, val), st_add_meta(w, "endoret.vit." key, buf))
    M("img", "%d", c->img); M("patch", "%d", c->patch); M("in_chans", "%d", c->in_chans);
    M("dim", "%d", c->dim); M("depth", "%d", c->depth); M("heads", "%d", c->heads);
    M("mlp_ratio", "%.17g", c->mlp_ratio); M("qkv_bias", "%d", c->qkv_bias);
    M("registers", "%d", c->registers); M("pos_prefix", "%d", c->pos_prefix);
    M("layerscale", "%.17g", c->layerscale); M("pos_fixed", "%d", c->pos_fixed); M("eps", "%.17g", c->eps);
#undef M
}

const st_tensor *vit_st_registers(const st_file *f, const char *prefix, const char **name_out) {
    static __thread char a[512], b[512];
    snprintf(a, sizeof a, "%sreg_token", prefix);
    snprintf(b, sizeof b, "%sregister_tokens", prefix);
    const st_tensor *timm = st_find(f, a), *meta = st_find(f, b);
    *name_out = NULL;
    if (timm && meta) {
        *name_out = a;
        er_fail(ER_INPUT, "%s: both '%s' (timm) and '%s' (Meta DINOv2) register tokens: which ones the model uses is "
                "ambiguous", f->path, a, b);
        return NULL;
    }
    if (timm || meta) *name_out = timm ? a : b;
    return timm ? timm : meta;
}

int vit_config_from_st(const st_file *f, const char *prefix, vit_config *c) {
    char name[512];
    memset(c, 0, sizeof *c);
    c->mlp_ratio = 4; c->qkv_bias = 1; c->eps = 1e-6; c->pos_prefix = 1;
    snprintf(name, sizeof name, "%spatch_embed.proj.weight", prefix);
    const st_tensor *pw = st_find(f, name);
    if (!pw || pw->ndim != 4 || pw->shape[2] != pw->shape[3])
        return er_fail(ER_INPUT, "%s: no ViT here ('%s' [D,C,p,p] missing)", f->path, name);
    c->dim = (int)pw->shape[0]; c->in_chans = (int)pw->shape[1]; c->patch = (int)pw->shape[2];
    c->heads = c->dim >= 64 ? c->dim / 64 : 1;
    while (1) {
        snprintf(name, sizeof name, "%sblocks.%d.attn.qkv.weight", prefix, c->depth);
        if (!st_find(f, name)) break;
        c->depth++;
    }
    snprintf(name, sizeof name, "%sblocks.0.mlp.fc1.weight", prefix);
    const st_tensor *fc1 = st_find(f, name);
    if (fc1 && fc1->ndim == 2) c->mlp_ratio = (double)fc1->shape[0] / c->dim;
    snprintf(name, sizeof name, "%sblocks.0.attn.qkv.bias", prefix);
    c->qkv_bias = c->depth == 0 || st_find(f, name) != NULL;
    /* register tokens: timm calls them reg_token, Meta's DINOv2 register_tokens (both [1, R, D]) */
    const char *reg_name = NULL;
    const st_tensor *rt = vit_st_registers(f, prefix, &reg_name);
    if (!rt && reg_name) return ER_INPUT;
    if (rt) {
        int64_t n = 1, r = rt->ndim >= 2 ? rt->shape[rt->ndim - 2] : 0;
        for (int d = 0; d < rt->ndim - 2; d++) n *= rt->shape[d];
        if (rt->ndim < 2 || n != 1 || rt->shape[rt->ndim - 1] != c->dim || r < 1 || r > 64) {
            char sh[96] = "";
            for (int d = 0; d < rt->ndim; d++)
                snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", d ? "," : "", (long long)rt->shape[d]);
            return er_fail(ER_INPUT, "%s: '%s' has shape [%s], expected [1, R, %d] register tokens (R = 1..64)", f->path,
                           reg_name, sh, c->dim);
        }
        c->registers = (int)r;
    }
    snprintf(name, sizeof name, "%spos_embed", prefix);
    const st_tensor *pe = st_find(f, name);
    if (!pe) return er_fail(ER_INPUT, "%s: '%s' missing", f->path, name);
    int64_t rows = pe->numel / c->dim;
    /* which prefix count leaves a square grid: 1 ([CLS], timm/MAE), then 0, then 1 + R */
    int cands[3] = {1, 0, 1 + c->registers}, found = 0;
    for (int k = 0; k < 3 && !found; k++) {
        int64_t Lr = rows - cands[k];
        int64_t g = (int64_t)llround(sqrt((double)(Lr > 0 ? Lr : 0)));
        if (Lr > 0 && g * g == Lr) { c->pos_prefix = cands[k]; c->img = (int)g * c->patch; found = 1; }
    }
    if (!found) return er_fail(ER_INPUT, "%s: pos_embed has %lld rows: not a square grid plus prefix", f->path, (long long)rows);
    /* the model is learned unless our own metadata says fixed (a frozen sin-cos table loads as learned) */
    c->pos_fixed = 0;
    int v;
    if (meta_int(f, "endoret.vit.heads", &v)) c->heads = v;
    if (meta_int(f, "endoret.vit.pos_fixed", &v)) c->pos_fixed = v;
    if (meta_int(f, "endoret.vit.img", &v) && v / c->patch * c->patch == v && (v / c->patch) * (v / c->patch) == rows - c->pos_prefix) c->img = v;
    const char *s;
    if ((s = st_meta(f, "endoret.vit.eps"))) c->eps = atof(s);
    if ((s = st_meta(f, "endoret.vit.layerscale"))) c->layerscale = atof(s);
    snprintf(name, sizeof name, "%sblocks.0.ls1.gamma", prefix);
    if (st_find(f, name) && c->layerscale <= 0) c->layerscale = 1e-5;
    if (!st_find(f, name)) c->layerscale = 0;
    return vit_config_check(c);
}

vit *vit_load(const st_file *f, const char *prefix) {
    vit_config c;
    if (vit_config_from_st(f, prefix, &c)) return NULL;
    vit *v = vit_new(&c, 0);
    if (!v) return NULL;
    /* Meta's file names the registers register_tokens: read our reg_token under that name */
    const char *reg_name = NULL;
    char *own = NULL;
    if (v->reg_token && vit_st_registers(f, prefix, &reg_name) && strstr(reg_name, "register_tokens")) {
        own = v->reg_token->name;
        v->reg_token->name = xstrdup("register_tokens");
    }
    int rc = params_load_st(&v->params, f, prefix, 1);
    if (own) {
        free(v->reg_token->name);
        v->reg_token->name = own;
    }
    if (rc) {
        vit_free(v);
        return NULL;
    }
    return v;
}
