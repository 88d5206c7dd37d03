/* optim.c — AdamW / SGD over parameter lists; the arithmetic is the backend's adamw_many / sgd_many /
 * fill_many / sumsq_many / scale ops (kernels/ops.def): one call per device for the whole list, not
 * one per tensor (a ViT-L has ~400 parameter tensors). See optim.h. */
#include "nn/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/profile.h"
#include "nn/base/base.h"
#include "nn/optim_flat.h"
#include "nn/schedule.h"

/* Does the last dotted component of `name` equal `word`, or end with "_" + word? */
static int last_component_is(const char *name, const char *word, int allow_prefixed) {
    const char *last = strrchr(name, '.');
    last = last ? last + 1 : name;
    size_t n = strlen(last), w = strlen(word);
    if (!strcmp(last, word)) return 1;
    return allow_prefixed && n > w + 1 && last[n - w - 1] == '_' && !strcmp(last + n - w, word);
}

int optim_no_weight_decay(const tensor *p) {
    if ((p->flags & T_NO_DECAY) || p->ndim <= 1) return 1;
    const char *name = p->name ? p->name : "";
    size_t n = strlen(name);
    if (n >= 5 && !strcmp(name + n - 5, ".bias")) return 1;
    if (last_component_is(name, "pos_embed", 1)) return 1; /* pos_embed, decoder_pos_embed */
    static const char *const tokens[] = {"cls_token", "dist_token", "reg_token", "register_tokens", "mask_token"};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        if (last_component_is(name, tokens[i], 0)) return 1;
    return 0;
}

/* The host arrays handed to the multi-tensor ops, one entry per parameter, made once with the
 * optimizer and refilled per device and step. */
struct optim_arrays {
    float **p, **m, **v;
    uint16_t **p16;
    const float **g;
    int64_t *n;
    adamw_args *adamw;
    sgd_args *sgd;
};

static struct optim_arrays *arrays_new(int n) {
    size_t c = n ? (size_t)n : 1;
    struct optim_arrays *a = xcalloc(1, sizeof *a);
    a->p = xcalloc(c, sizeof *a->p);
    a->p16 = xcalloc(c, sizeof *a->p16);
    a->m = xcalloc(c, sizeof *a->m);
    a->v = xcalloc(c, sizeof *a->v);
    a->g = xcalloc(c, sizeof *a->g);
    a->n = xcalloc(c, sizeof *a->n);
    a->adamw = xcalloc(c, sizeof *a->adamw);
    a->sgd = xcalloc(c, sizeof *a->sgd);
    return a;
}

static void arrays_free(struct optim_arrays *a) {
    if (!a) return;
    free(a->p); free(a->p16); free(a->m); free(a->v); free(a->g); free(a->n); free(a->adamw); free(a->sgd);
    free(a);
}

optimizer *optim_new(const optim_config *cfg_in, const param_list *pl) {
    optim_config cfg = *cfg_in;
    if (cfg.kind == OPTIM_ADAMW && cfg.beta1 == 0 && cfg.beta2 == 0 && cfg.eps == 0) {
        cfg.beta1 = 0.9;
        cfg.beta2 = 0.999;
        cfg.eps = 1e-8;
    }
    if (cfg.kind != OPTIM_ADAMW && cfg.kind != OPTIM_SGD) { er_fail(ER_INPUT, "optimizer: unknown kind %d", (int)cfg.kind); return NULL; }
    if (!(cfg.lr >= 0) || !(cfg.weight_decay >= 0)) { er_fail(ER_INPUT, "optimizer: lr %g and weight_decay %g must be >= 0", cfg.lr, cfg.weight_decay); return NULL; }
    if (cfg.kind == OPTIM_ADAMW && !(cfg.beta1 >= 0 && cfg.beta1 < 1 && cfg.beta2 >= 0 && cfg.beta2 < 1 && cfg.eps > 0)) {
        er_fail(ER_INPUT, "optimizer: AdamW needs 0 <= beta1, beta2 < 1 and eps > 0 (got %g, %g, %g)", cfg.beta1, cfg.beta2, cfg.eps);
        return NULL;
    }
    if (cfg.kind == OPTIM_SGD && (!(cfg.momentum >= 0 && cfg.momentum < 1) || (cfg.nesterov && cfg.momentum == 0))) {
        er_fail(ER_INPUT, "optimizer: SGD momentum %g must be in [0, 1) and > 0 with nesterov", cfg.momentum);
        return NULL;
    }
    int use_layer_decay = cfg.layer_decay > 0 && cfg.layer_decay != 1;
    if (use_layer_decay && cfg.depth <= 0) { er_fail(ER_INPUT, "optimizer: layer_decay %g needs the model depth", cfg.layer_decay); return NULL; }
    for (int i = 0; i < pl->n; i++)
        if (!backend_get(pl->t[i]->device)) {
            er_fail(ER_RUNTIME, "optimizer: parameter '%s' is on device %d, which has no backend in this build",
                    pl->t[i]->name ? pl->t[i]->name : "?", pl->t[i]->device);
            return NULL;
        } else if ((pl->t[i]->flags & T_REQUIRES_GRAD) && pl->t[i]->dtype != DT_F32) {
            /* trainable weights and their moments stay fp32 (master weights, docs/dtypes.md) */
            er_fail(ER_INPUT, "optimizer: trainable parameter '%s' is %s; parameters stay fp32",
                    pl->t[i]->name ? pl->t[i]->name : "?", er_dtype_name(pl->t[i]->dtype));
            return NULL;
        }
    optimizer *o = xcalloc(1, sizeof *o);
    o->cfg = cfg;
    o->lr = cfg.lr;
    o->ps = xcalloc(pl->n ? (size_t)pl->n : 1, sizeof *o->ps);
    for (int i = 0; i < pl->n; i++) {
        tensor *p = pl->t[i];
        if (!(p->flags & T_REQUIRES_GRAD)) continue; /* frozen: no state */
        optim_param *q = &o->ps[o->n++];
        q->p = p;
        q->wd = optim_no_weight_decay(p) ? 0.0f : (float)cfg.weight_decay;
        q->lr_scale = use_layer_decay ? (float)layer_decay_scale(p->name ? p->name : "", cfg.depth, cfg.layer_decay) : 1.0f;
    }
    optim_flat_build(o); /* state of the flat parameters: views of its buffers */
    for (int i = 0; i < o->n; i++) {
        optim_param *q = &o->ps[i];
        const tensor *p = q->p;
        if (q->flat) continue;
        if (cfg.kind == OPTIM_ADAMW) {
            q->m = tensor_new_on(p->device, p->ndim, p->shape);
            q->v = tensor_new_on(p->device, p->ndim, p->shape);
        } else if (cfg.momentum > 0) {
            q->m = tensor_new_on(p->device, p->ndim, p->shape);
        }
    }
    o->arrays = arrays_new(o->n + 1); /* a device's entries: its spans and loose tensors, or one buffer and the loose grads */
    return o;
}

void optim_free(optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        tensor_free(o->ps[i].m);
        tensor_free(o->ps[i].v);
    }
    arrays_free(o->arrays);
    optim_flat_free(o->flat);
    free(o->ps);
    free(o);
}

void optim_set_lr(optimizer *o, double lr) { o->lr = lr; }

int optim_find(const optimizer *o, const char *name) {
    for (int i = 0; i < o->n; i++)
        if (o->ps[i].p->name && !strcmp(o->ps[i].p->name, name)) return i;
    return -1;
}

/* Parameters and their grads are long-lived packed tensors; a strided view would make the flat
 * kernels wrong, so refuse it. */
static int check_packed(const optim_param *q) {
    const tensor *p = q->p;
    if (!tensor_is_contiguous(p) || (p->grad && !tensor_is_contiguous(p->grad)))
        return er_fail(ER_RUNTIME, "optimizer: parameter '%s' or its grad is not contiguous", p->name ? p->name : "?");
    return ER_OK;
}

/* Entry c of the arrays: n elements at p/g/m/v updated with lr multiplier `lr_scale` and weight
 * decay `wd`, for step t. */
static void add_entry(const optimizer *o, int c, float *p, uint16_t *p16, const float *g, float *m, float *v,
                      int64_t n, float lr_scale, float wd, int64_t t) {
    struct optim_arrays *A = o->arrays;
    const float lr = (float)(o->lr * lr_scale);
    A->p[c] = p;
    A->p16[c] = p16;
    A->g[c] = g;
    A->m[c] = m;
    A->v[c] = v;
    A->n[c] = n;
    if (o->cfg.kind == OPTIM_ADAMW) {
        A->adamw[c] = (adamw_args){.lr = lr, .beta1 = (float)o->cfg.beta1, .beta2 = (float)o->cfg.beta2,
                                   .eps = (float)o->cfg.eps, .weight_decay = wd, .gscale = 1.0f};
        adamw_scalars(&A->adamw[c], t);
    } else {
        A->sgd[c] = (sgd_args){.lr = lr, .momentum = (float)o->cfg.momentum, .weight_decay = wd, .gscale = 1.0f,
                               .nesterov = o->cfg.nesterov, .first = o->step == 0};
    }
}

static float *at(er_storage *st, int64_t off) { return st ? (float *)st->data + off : NULL; }

/* Every parameter is checked before any is written, so a refused step changes nothing. Per
 * device: the flat buffer's spans, then each parameter outside it. */
static int step_impl(optimizer *o) {
    const int64_t t = o->step + 1;
    for (int i = 0; i < o->n; i++) {
        int rc = o->ps[i].p->grad ? check_packed(&o->ps[i]) : ER_OK;
        if (rc) return rc;
    }
    struct optim_arrays *A = o->arrays;
    for (int dev = 0; dev < DEV_COUNT; dev++) {
        int c = 0;
        optim_flat_group *G = optim_flat_group_of(o, dev);
        const int nspans = G ? optim_flat_spans(o, G) : 0;
        for (int s = 0; s < nspans; s++) {
            const optim_span *sp = &G->spans[s];
            add_entry(o, c++, at(G->p, sp->off), G->p16 ? (uint16_t *)G->p16->data + sp->off : NULL, at(G->g, sp->off),
                      at(G->m, sp->off), at(G->v, sp->off), sp->n, sp->lr_scale, sp->wd, t);
        }
        for (int i = 0; i < o->n; i++) {
            optim_param *q = &o->ps[i];
            /* no gradient buffer yet: nothing to apply (as PyTorch's grad None) */
            if (!q->p->grad || q->p->device != dev) continue;
            tensor_drop_packed(q->p); /* the step writes p: a packed copy of it (inference) is stale */
            if (!q->flat)
                add_entry(o, c++, q->p->data, NULL, q->p->grad->data, q->m ? q->m->data : NULL, q->v ? q->v->data : NULL,
                          tensor_numel(q->p), q->lr_scale, q->wd, t);
        }
        if (!c) continue;
        const er_backend *k = backend_get(dev);
        const float *gs = o->guard; /* one device: optim_guard checked */
        if (o->cfg.kind == OPTIM_ADAMW) k->adamw_many(c, A->p, A->g, A->m, A->v, A->n, A->adamw, A->p16, gs);
        else k->sgd_many(c, A->p, A->g, A->m, A->n, A->sgd, A->p16, gs);
        for (int i = 0; G && G->p16 && i < G->count; i++) { /* written in that pass (the whole spans) */
            optim_param *q = &o->ps[G->index[i]];
            if (q->p->grad) q->p->flags |= T_BF16_FRESH;
        }
    }
    o->step = t;
    o->guard = NULL;
    return ER_OK;
}

int optim_grad_buffers_max(const optimizer *o) { return o->n + DEV_COUNT; }

int optim_grad_buffers(const optimizer *o, float **g, int64_t *n) {
    int c = 0;
    for (int dev = 0; dev < DEV_COUNT; dev++) {
        const optim_flat_group *G = optim_flat_group_of(o, dev);
        if (G) {
            g[c] = G->g->data;
            n[c++] = G->numel;
        }
    }
    for (int i = 0; i < o->n; i++) {
        tensor *gr = o->ps[i].p->grad;
        if (gr && !o->ps[i].flat) {
            g[c] = gr->data;
            n[c++] = tensor_numel(gr);
        }
    }
    return c;
}

/* Each device's flat gradient buffer and its other contiguous gradients in one fill_many; a
 * strided one (not made by autograd) on its own through tensor_fill. */
static void zero_grad_impl(optimizer *o) {
    struct optim_arrays *A = o->arrays;
    for (int dev = 0; dev < DEV_COUNT; dev++) {
        int c = 0;
        const optim_flat_group *G = optim_flat_group_of(o, dev);
        if (G) {
            A->p[c] = G->g->data;
            A->n[c++] = G->numel;
        }
        for (int i = 0; i < o->n; i++) {
            tensor *g = o->ps[i].p->grad;
            if (!g || g->device != dev) continue;
            tensor_drop_packed(g);
            if (o->ps[i].flat) continue;
            if (!tensor_is_contiguous(g)) {
                tensor_fill(g, 0.0f);
                continue;
            }
            A->p[c] = g->data;
            A->n[c++] = tensor_numel(g);
        }
        if (c) backend_get(dev)->fill_many(c, A->p, A->n, 0.0f);
    }
}

/* The global norm: per device, every gradient's sum of squares in one sumsq_many call (one device
 * synchronisation, not one per tensor), then added in parameter order. */
static double clip_impl(optimizer *o, double max_norm) {
    const float **xs = xmalloc((size_t)(o->n ? o->n : 1) * sizeof *xs);
    int64_t *ns = xmalloc((size_t)(o->n ? o->n : 1) * sizeof *ns);
    double *ss = xcalloc((size_t)(o->n ? o->n : 1), sizeof *ss), *part = xmalloc((size_t)(o->n ? o->n : 1) * sizeof *part);
    int *slot = xmalloc((size_t)(o->n ? o->n : 1) * sizeof *slot);
    for (int dev = 0; dev < DEV_COUNT; dev++) {
        int c = 0;
        for (int i = 0; i < o->n; i++) {
            const tensor *g = o->ps[i].p->grad;
            if (!g || g->device != dev) continue;
            xs[c] = g->data;
            ns[c] = tensor_numel(g);
            slot[c++] = i;
        }
        if (!c) continue;
        backend_get(dev)->sumsq_many(c, xs, ns, part);
        for (int j = 0; j < c; j++) ss[slot[j]] = part[j];
    }
    double sumsq = 0.0;
    for (int i = 0; i < o->n; i++) sumsq += ss[i];
    free(xs); free(ns); free(ss); free(part); free(slot);
    double norm = sqrt(sumsq);
    if (max_norm > 0 && isfinite(norm) && norm > max_norm) {
        float coef = (float)(max_norm / (norm + 1e-6));
        for (int i = 0; i < o->n; i++) {
            tensor *g = o->ps[i].p->grad;
            if (g) backend_get(g->device)->scale(g->data, tensor_numel(g), coef);
        }
    }
    return norm;
}

/* The gradients in parameter order, as clip_impl sums them. */
static int guard_impl(optimizer *o, int device, double max_norm, const float *losses, int nl, double *norm,
                      float *gscale) {
    for (int i = 0; i < o->n; i++) {
        const tensor *g = o->ps[i].p->grad;
        if (g && g->device != device) return 1;
    }
    struct optim_arrays *A = o->arrays; /* one entry per parameter; step_impl refills them */
    int c = 0;
    for (int i = 0; i < o->n; i++) {
        const tensor *g = o->ps[i].p->grad;
        if (!g) continue;
        A->g[c] = g->data;
        A->n[c++] = tensor_numel(g);
    }
    backend_get(device)->step_guard(c, A->g, A->n, losses, nl, max_norm, norm, gscale);
    o->guard = gscale;
    return ER_OK;
}

int optim_guard(optimizer *o, int device, double max_norm, const float *losses, int nl, double *norm, float *gscale) {
    int prev = prof_phase(PROF_OPTIMIZER), rc = guard_impl(o, device, max_norm, losses, nl, norm, gscale);
    prof_phase(prev);
    return rc;
}

/* The optimizer's kernels and host work are their own phase of a profiled step. */
int optim_step(optimizer *o) {
    int prev = prof_phase(PROF_OPTIMIZER), rc = step_impl(o);
    prof_phase(prev);
    return rc;
}

void optim_zero_grad(optimizer *o) {
    int prev = prof_phase(PROF_OPTIMIZER);
    zero_grad_impl(o);
    prof_phase(prev);
}

double optim_clip_grad_norm(optimizer *o, double max_norm) {
    int prev = prof_phase(PROF_OPTIMIZER);
    double norm = clip_impl(o, max_norm);
    prof_phase(prev);
    return norm;
}
