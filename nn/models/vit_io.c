/* vit_io.c — a ViT from a safetensors file of any known layout: config from metadata / tensor shapes,
 * weights through the layout's name map (nn/models/vit_layouts.c). */
#include "nn/models/vit_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/models/pos_interp.h"

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
    M("mlp_hidden", "%d", (int)vit_mlp_hidden(c)); M("swiglu", "%d", c->swiglu);
    M("pos_interp", "%s", pos_interp_name(c->pos_interp));
#undef M
}

static void shape_str(int ndim, const int64_t *s, char *buf, size_t n) {
    size_t l = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && l < n; d++) l += (size_t)snprintf(buf + l, n - l, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (l < n) snprintf(buf + l, n - l, "]");
}

/* the file's own name(s) of a canonical tensor, for messages */
static const char *file_names(const vit_tensor *t, char *buf, size_t n) {
    if (t->nparts == 1) snprintf(buf, n, "%s", t->part[0]->name);
    else snprintf(buf, n, "%s' + '%s' + '%s", t->part[0]->name, t->part[1]->name, t->part[2]->name);
    return buf;
}

int vit_config_from_tensors(const vit_tensors *vt, vit_config *c) {
    const st_file *f = vt->f;
    char name[512], fn[1024];
    memset(c, 0, sizeof *c);
    c->mlp_ratio = 4; c->qkv_bias = 1; c->eps = 1e-6; c->pos_prefix = 1;
    const vit_tensor *pw = vit_tensors_find(vt, "patch_embed.proj.weight");
    if (!pw || pw->ndim != 4 || pw->shape[2] != pw->shape[3]) {
        vit_tensors_file_name(vt, "patch_embed.proj.weight", fn, sizeof fn);
        return er_fail(ER_INPUT, "%s: no ViT here ('%s' [D,C,p,p] missing)", f->path, fn);
    }
    c->dim = (int)pw->shape[0]; c->in_chans = (int)pw->shape[1]; c->patch = (int)pw->shape[2];
    c->heads = c->dim >= 64 ? c->dim / 64 : 1;
    while (1) {
        snprintf(name, sizeof name, "blocks.%d.attn.qkv.weight", c->depth);
        if (!vit_tensors_find(vt, name)) break;
        c->depth++;
    }
    /* the MLP: fc2 [D, H]; fc1 [H, D] (GELU) or [2H, D] (SwiGLU, packed x1 | x2) */
    const vit_tensor *fc1 = vit_tensors_find(vt, "blocks.0.mlp.fc1.weight"), *fc2 = vit_tensors_find(vt, "blocks.0.mlp.fc2.weight");
    if (fc1 && fc2 && fc1->ndim == 2 && fc2->ndim == 2) {
        int64_t h1 = fc1->shape[0], h2 = fc2->shape[1];
        if (h1 != h2 && h1 != 2 * h2)
            return er_fail(ER_INPUT, "%s: '%s' has %lld rows and '%s' %lld columns: neither an MLP (equal) nor a SwiGLU "
                           "(twice)", f->path, file_names(fc1, fn, sizeof fn), (long long)h1, fc2->part[0]->name, (long long)h2);
        c->swiglu = h1 == 2 * h2;
        c->mlp_hidden = (int)h2;
        c->mlp_ratio = (double)h2 / c->dim;
    }
    c->qkv_bias = c->depth == 0 || vit_tensors_find(vt, "blocks.0.attn.qkv.bias") != NULL;
    /* register tokens: timm's reg_token, Meta's register_tokens, HF's embeddings.register_tokens: [1, R, D] */
    const vit_tensor *rt = vit_tensors_find(vt, "reg_token");
    if (rt) {
        int64_t n = 1, r = rt->ndim >= 2 ? rt->shape[rt->ndim - 2] : 0;
        for (int d = 0; d < rt->ndim - 2; d++) n *= rt->shape[d];
        if (rt->ndim < 2 || n != 1 || rt->shape[rt->ndim - 1] != c->dim || r < 1 || r > 64) {
            char sh[96];
            shape_str(rt->ndim, rt->shape, sh, sizeof sh);
            return er_fail(ER_INPUT, "%s: '%s' has shape %s, expected [1, R, %d] register tokens (R = 1..64)", f->path,
                           rt->part[0]->name, sh, c->dim);
        }
        c->registers = (int)r;
    }
    const vit_tensor *pe = vit_tensors_find(vt, "pos_embed");
    if (!pe) {
        vit_tensors_file_name(vt, "pos_embed", fn, sizeof fn);
        return er_fail(ER_INPUT, "%s: '%s' missing", f->path, fn);
    }
    int64_t rows = pe->numel / c->dim;
    /* which prefix count leaves a square grid: 1 ([CLS], timm/MAE), then 0, then 1 + R */
    int cands[3] = {1, 0, 1 + c->registers}, found = 0;
    for (int k = 0; k < 3 && !found; k++) {
        int64_t Lr = rows - cands[k];
        int64_t g = (int64_t)llround(sqrt((double)(Lr > 0 ? Lr : 0)));
        if (Lr > 0 && g * g == Lr) { c->pos_prefix = cands[k]; c->img = (int)g * c->patch; found = 1; }
    }
    if (!found)
        return er_fail(ER_INPUT, "%s: '%s' has %lld rows: not a square grid plus prefix", f->path, pe->part[0]->name,
                       (long long)rows);
    /* the model is learned unless our own metadata says fixed (a frozen sin-cos table loads as learned) */
    c->pos_fixed = 0;
    int v;
    if (meta_int(f, "endoret.vit.heads", &v)) c->heads = v;
    if (meta_int(f, "endoret.vit.pos_fixed", &v)) c->pos_fixed = v;
    if (meta_int(f, "endoret.vit.img", &v) && v / c->patch * c->patch == v && (v / c->patch) * (v / c->patch) == rows - c->pos_prefix) c->img = v;
    const char *s;
    if ((s = st_meta(f, "endoret.vit.eps"))) c->eps = atof(s);
    if ((s = st_meta(f, "endoret.vit.layerscale"))) c->layerscale = atof(s);
    if (vit_tensors_find(vt, "blocks.0.ls1.gamma") && c->layerscale <= 0) c->layerscale = 1e-5;
    if (!vit_tensors_find(vt, "blocks.0.ls1.gamma")) c->layerscale = 0;
    c->pos_interp = vit_layout_pos_interp(vt->layout, c->registers);
    if ((s = st_meta(f, "endoret.vit.pos_interp")) && (c->pos_interp = pos_interp_rule(s)) < 0)
        return er_fail(ER_INPUT, "%s: metadata endoret.vit.pos_interp = '%s' (bicubic, bicubic_aa, bicubic_offset)", f->path, s);
    return vit_config_check(c);
}

int vit_config_from_st(const st_file *f, const char *prefix, vit_config *c) {
    vit_tensors t;
    int rc = vit_tensors_open(f, prefix, 0, &t);
    if (rc) return rc;
    rc = vit_config_from_tensors(&t, c);
    vit_tensors_free(&t);
    return rc;
}

/* equal up to leading / inner 1s, as params_load_st (timm's [1,1,D] tokens vs ours) */
static int same_shape(const vit_tensor *s, const tensor *t) {
    int64_t a[ST_MAX_DIMS], b[T_MAX_DIMS];
    int na = 0, nb = 0;
    for (int d = 0; d < s->ndim; d++) if (s->shape[d] != 1) a[na++] = s->shape[d];
    for (int d = 0; d < t->ndim; d++) if (t->shape[d] != 1) b[nb++] = t->shape[d];
    if (na != nb || s->numel != tensor_numel(t)) return 0;
    for (int d = 0; d < na; d++) if (a[d] != b[d]) return 0;
    return 1;
}

vit *vit_load_tensors(const vit_tensors *vt, int strict) {
    const st_file *f = vt->f;
    vit_config c;
    if (vit_config_from_tensors(vt, &c)) return NULL;
    vit *v = vit_new(&c, 0);
    if (!v) return NULL;
    char *used = xcalloc((size_t)(vt->n ? vt->n : 1), 1);
    char fn[1024];
    int rc = ER_OK;
    for (int i = 0; i < v->params.n && !rc; i++) {
        tensor *t = v->params.t[i];
        const vit_tensor *s = vit_tensors_find(vt, t->name);
        if (!s) {
            vit_tensors_file_name(vt, t->name, fn, sizeof fn);
            rc = er_fail(ER_INPUT, "%s: tensor '%s' missing (%s layout)", f->path, fn, vit_layout_label(vt->layout));
            break;
        }
        used[s - vt->t] = 1;
        if (!same_shape(s, t)) {
            char a[96], b[96];
            shape_str(s->ndim, s->shape, a, sizeof a);
            rc = er_fail(ER_INPUT, "%s: tensor '%s' has shape %s, the model expects %s", f->path, file_names(s, fn, sizeof fn),
                         a, tensor_shape_str(t, b, sizeof b));
            break;
        }
        float *buf = xmalloc(sizeof(float) * (size_t)s->numel);
        rc = vit_tensors_read(vt, s, buf);
        for (int64_t k = 0; !rc && k < s->numel; k++)
            if (!isfinite(buf[k]))
                rc = er_fail(ER_INPUT, "%s: tensor '%s' holds a non-finite value (%g at element %lld)", f->path,
                             file_names(s, fn, sizeof fn), buf[k], (long long)k);
        if (!rc) tensor_copy_from_host(t, buf);
        free(buf);
    }
    for (int i = 0; !rc && strict && vt->layout != VIT_LAYOUT_ENDORET && i < vt->n; i++)
        if (!used[i])
            rc = er_fail(ER_INPUT, "%s: tensor '%s' is not used by the ViT the file describes (depth %d%s): refused, "
                         "nothing is loaded partially", f->path, file_names(&vt->t[i], fn, sizeof fn), c.depth,
                         c.layerscale > 0 ? "" : ", no LayerScale in block 0");
    free(used);
    if (rc) {
        vit_free(v);
        return NULL;
    }
    return v;
}

vit *vit_load(const st_file *f, const char *prefix) {
    vit_tensors t;
    if (vit_tensors_open(f, prefix, 0, &t)) return NULL;
    vit *v = vit_load_tensors(&t, 0);
    vit_tensors_free(&t);
    return v;
}
