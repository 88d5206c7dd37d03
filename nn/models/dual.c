/* dual.c — the dual-backbone network: branches, strict branch loading, forward (dual.h). */
#include "nn/models/dual.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/safetensors.h"
#include "nn/models/vit_layouts.h"
#include "nn/base/base.h"
#include "nn/init.h"
#include "nn/layers/layer_params.h"
#include "nn/models/vit_io.h"
#include "nn/models/vit_lora.h"
#include "nn/ops.h"

const char *const dual_branch_name[DUAL_NBRANCH] = {"gastronet", "dinov2"};

int dual_branches_parse(const char *s, const char *key, int *mask) {
    if (s && !strcmp(s, "both")) *mask = DUAL_BOTH;
    else if (s && !strcmp(s, "gastronet")) *mask = DUAL_GASTRONET;
    else if (s && !strcmp(s, "dinov2")) *mask = DUAL_DINOV2;
    else return er_fail(ER_INPUT, "%s = '%s': expected both, gastronet or dinov2", key, s ? s : "");
    return ER_OK;
}

const char *dual_branches_name(int mask) {
    return mask == DUAL_BOTH ? "both" : mask == DUAL_GASTRONET ? "gastronet" : "dinov2";
}

static void rename_prefixed(tensor *t, const char *prefix) {
    char *n = xmalloc(strlen(prefix) + strlen(t->name) + 2);
    sprintf(n, "%s.%s", prefix, t->name);
    free(t->name);
    t->name = n;
}

dual_net *dual_new(const dual_config *cfg, vit *v[DUAL_NBRANCH], uint64_t seed) {
    int bad = 0, in = 0, img = 0;
    for (int i = 0; i < DUAL_NBRANCH; i++) {
        int on = (cfg->branches >> i) & 1;
        if (on != (v[i] != NULL)) bad = er_fail(ER_INPUT, "dual: branch %s is %s but %s", dual_branch_name[i],
                                                on ? "on" : "off", v[i] ? "given" : "missing");
        if (v[i]) {
            in += v[i]->cfg.dim;
            if (img && v[i]->cfg.img != img) bad = er_fail(ER_INPUT, "dual: branches at %d and %d px", img, v[i]->cfg.img);
            img = v[i]->cfg.img;
        }
    }
    if (!bad && cfg->embed_dim == 0 && cfg->branches == DUAL_BOTH)
        bad = er_fail(ER_INPUT, "dual: two branches need the fusion head (dual.embed_dim > 0)");
    if (!bad && cfg->embed_dim < 0) bad = er_fail(ER_INPUT, "dual: embed_dim %d", cfg->embed_dim);
    if (bad) {
        for (int i = 0; i < DUAL_NBRANCH; i++) vit_free(v[i]);
        return NULL;
    }
    dual_net *d = xcalloc(1, sizeof *d);
    d->cfg = *cfg;
    for (int i = 0; i < DUAL_NBRANCH; i++) {
        if (!(d->v[i] = v[i])) continue;
        vit *b = v[i];
        for (int j = 0; j < b->params.n; j++) tensor_set_requires_grad(b->params.t[j], 0); /* frozen backbone */
        if (cfg->lora.r > 0 && vit_lora_attach(b, &cfg->lora, seed + 17 * (i + 1))) {
            dual_free(d);
            return NULL;
        }
        for (int j = 0; j < b->params.n; j++) {
            rename_prefixed(b->params.t[j], dual_branch_name[i]);
            params_add(&d->params, b->params.t[j]);
        }
    }
    param_list *own = &d->own;
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i] && cfg->pool == POOL_GEM) {
            char n[64];
            snprintf(n, sizeof n, "%s.gem_p", dual_branch_name[i]);
            d->gem_p[i] = layer_param(own, n, 1, SHAPE(1));
            d->gem_p[i]->data[0] = 3.0f;
            d->gem_p[i]->flags |= T_NO_DECAY;
        }
    if (cfg->embed_dim > 0) {
        d->has_head = 1;
        fusion_head_init(&d->head, "fusion", in, cfg->embed_dim, seed + 101, own);
    }
    params_add_all(&d->params, own);
    return d;
}

void dual_free(dual_net *d) {
    if (!d) return;
    for (int i = 0; i < DUAL_NBRANCH; i++) vit_free(d->v[i]);
    params_free(&d->own);
    free(d->params.t);
    free(d);
}

int dual_out_dim(const dual_net *d) {
    if (d->has_head) return d->head.out;
    for (int i = 0; i < DUAL_NBRANCH; i++)
        if (d->v[i]) return d->v[i]->cfg.dim;
    return 0;
}

int64_t dual_trainable(const dual_net *d) {
    int64_t n = 0;
    for (int i = 0; i < d->params.n; i++)
        if (d->params.t[i]->flags & T_REQUIRES_GRAD) n += tensor_numel(d->params.t[i]);
    return n;
}

tensor *dual_forward(dual_net *d, const nn_ctx *ctx, tensor *img) {
    tensor *f[DUAL_NBRANCH];
    int n = 0;
    for (int i = 0; i < DUAL_NBRANCH; i++) {
        if (!d->v[i]) continue;
        tensor *tok = vit_forward_t(d->v[i], ctx, img, NULL, 0); /* [B, 1 + R + L, D] after the final norm */
        f[n++] = token_pool(d->cfg.pool, tok, 1 + d->v[i]->cfg.registers, d->gem_p[i], d->cfg.gem_eps);
    }
    if (d->has_head) return fusion_head_forward(&d->head, ctx, f, n);
    return op_l2_normalize(f[0], -1, 1e-12f);
}

/* ---------------------------------------------------------------- strict branch loading */

vit *dual_branch_load(const char *path, int img) {
    st_file f;
    if (st_open(path, &f)) return NULL;
    /* the project's strict layout maps (nn/models/vit_layouts.h): timm, Meta DINOv2 (register_tokens,
     * chunked blocks; mask_token dropped), Hugging Face, DINO v1 (backbone. / module. / teacher.
     * prefixes, the DINO head dropped); any other tensor, a missing or a reshaped one is refused */
    vit_tensors t;
    vit *v = NULL;
    if (!vit_tensors_open(&f, "", 1, &t)) {
        v = vit_load_tensors(&t, 1);
        vit_tensors_free(&t);
    }
    st_close(&f);
    if (v && vit_set_img(v, img)) { /* the table resampled with the rule of the file's layout */
        vit_free(v);
        v = NULL;
    }
    return v;
}
