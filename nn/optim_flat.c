/* optim_flat.c — one allocation per device for the trainable parameters, one for their gradients
 * and one for each optimizer moment, all with the same layout; every tensor is a view at its
 * offset (issue #27 item 4, as llm.c and PyTorch's fused/multi-tensor optimizers keep them).
 *
 * What it buys: zero_grad is one fill per device, the data-parallel all-reduce is one call over one
 * buffer, and the update runs over a few spans instead of one entry per tensor. The layout puts
 * tensors that update alike (same weight decay, same lr multiplier) next to each other, so with
 * timm's no-decay rule a model's update is two spans, and with layer-wise lr decay two per layer.
 *
 * Offsets are multiples of FLAT_ALIGN elements (256 bytes: what cuBLAS and wide vector loads
 * like). The padding between tensors is zero in every buffer and stays zero under both update
 * rules (zero weight, gradient and moments give a zero update), so a span may run over it.
 * Results are bit-identical to per-tensor updates: every element sees the same arithmetic.
 *
 * Which tensors: fp32 parameters that own packed storage and have a packed gradient that does too
 * (every tensor_param). A view of another tensor, a parameter listed twice, or one without a
 * gradient buffer yet keeps its storage and is updated as its own entry (optim.c).
 * Memory: the buffers replace the tensors' own allocations. While they are built, the weights
 * (then the gradients) exist twice: the weight buffer is made, every weight moves in and frees its
 * old storage, then the same for the gradients; the moments are made last (as per-tensor moments
 * were). Transient peak: one extra copy of the weights. */
#include "nn/optim_flat.h"

#include <stdlib.h>

#include "nn/base/base.h"

#define FLAT_ALIGN 64

static int64_t align_up(int64_t x) { return (x + FLAT_ALIGN - 1) / FLAT_ALIGN * FLAT_ALIGN; }

static int eligible(const optimizer *o, int i) {
    const tensor *p = o->ps[i].p;
    if (p->dtype != DT_F32 || !tensor_owns_storage(p) || !p->grad || p->grad->dtype != DT_F32 ||
        !tensor_owns_storage(p->grad) || !tensor_same_shape(p, p->grad))
        return 0;
    for (int j = 0; j < i; j++)
        if (o->ps[j].p == p) return 0; /* listed twice: the first entry is the flat one */
    return 1;
}

/* Layout order: by device, then by update arguments (so alike tensors are adjacent), then by list
 * position (deterministic). */
typedef struct {
    int device, index;
    float lr_scale, wd;
} layout_key;

static int by_group(const void *a, const void *b) {
    const layout_key *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->lr_scale != y->lr_scale) return x->lr_scale > y->lr_scale ? -1 : 1;
    if (x->wd != y->wd) return x->wd > y->wd ? -1 : 1;
    return x->index - y->index;
}

static tensor *state_view(er_storage *st, const tensor *p, int64_t off) {
    return st ? tensor_in_storage(st, DT_F32, off, p->ndim, p->shape) : NULL;
}

/* Flattens the tensors order[0..cnt) (one device, sorted) into a new group. */
static void build_group(optimizer *o, optim_flat_group *G, const int *order, int cnt) {
    int64_t *off = xmalloc((size_t)cnt * sizeof *off), total = 0;
    for (int k = 0; k < cnt; k++) {
        total = align_up(total);
        off[k] = total;
        total += tensor_numel(o->ps[order[k]].p);
    }
    const int dev = o->ps[order[0]].p->device, adamw = o->cfg.kind == OPTIM_ADAMW;
    G->device = dev;
    G->numel = align_up(total);
    G->count = cnt;
    G->index = xmalloc((size_t)cnt * sizeof *G->index);
    G->off = off;
    G->spans = xcalloc((size_t)cnt, sizeof *G->spans);
    /* weights, then gradients: each buffer is filled (and the storage it replaces freed) before the
     * next is made, so the transient is one buffer, not two. Rehoming cannot fail: eligible()
     * checked ownership, and the buffers are on the tensors' device. */
    G->p = storage_new(dev, DT_F32, G->numel);
    for (int k = 0; k < cnt; k++) tensor_rehome(o->ps[order[k]].p, G->p, off[k]);
    G->g = storage_new(dev, DT_F32, G->numel);
    for (int k = 0; k < cnt; k++) tensor_rehome(o->ps[order[k]].p->grad, G->g, off[k]);
    G->m = adamw || o->cfg.momentum > 0 ? storage_new(dev, DT_F32, G->numel) : NULL;
    G->v = adamw ? storage_new(dev, DT_F32, G->numel) : NULL;
    /* the bf16 copies: written (and marked fresh) by each step, so none is read before the first */
    G->p16 = o->cfg.bf16_weights ? storage_new(dev, DT_BF16, G->numel) : NULL;
    for (int k = 0; k < cnt; k++) {
        optim_param *q = &o->ps[order[k]];
        G->index[k] = order[k];
        q->m = state_view(G->m, q->p, off[k]);
        q->v = state_view(G->v, q->p, off[k]);
        if (G->p16) { /* the parameter's (tensor_free frees it; the storage outlives whichever goes first) */
            tensor_free(q->p->bf16);
            q->p->flags &= ~T_BF16_FRESH;
            q->p->bf16 = tensor_in_storage(G->p16, DT_BF16, off[k], q->p->ndim, q->p->shape);
        }
        q->flat = 1;
    }
}

int optim_flat_spans(const optimizer *o, optim_flat_group *G) {
    int ns = 0;
    for (int k = 0; k < G->count; k++) {
        const optim_param *q = &o->ps[G->index[k]];
        const int64_t end = G->off[k] + tensor_numel(q->p);
        optim_span *s = ns ? &G->spans[ns - 1] : NULL;
        if (s && s->lr_scale == q->lr_scale && s->wd == q->wd) s->n = end - s->off; /* over the padding */
        else G->spans[ns++] = (optim_span){.off = G->off[k], .n = end - G->off[k], .lr_scale = q->lr_scale, .wd = q->wd};
    }
    return ns;
}

void optim_flat_build(optimizer *o) {
    layout_key *key = xmalloc((size_t)(o->n ? o->n : 1) * sizeof *key);
    int cnt = 0;
    for (int i = 0; i < o->n; i++)
        if (eligible(o, i))
            key[cnt++] = (layout_key){.device = o->ps[i].p->device, .index = i, .lr_scale = o->ps[i].lr_scale, .wd = o->ps[i].wd};
    qsort(key, (size_t)cnt, sizeof *key, by_group);
    int *order = xmalloc((size_t)(cnt ? cnt : 1) * sizeof *order);
    for (int k = 0; k < cnt; k++) order[k] = key[k].index;
    free(key);
    struct optim_flat *f = cnt ? xcalloc(1, sizeof *f) : NULL;
    for (int a = 0; a < cnt;) {
        int b = a;
        while (b < cnt && o->ps[order[b]].p->device == o->ps[order[a]].p->device) b++;
        build_group(o, &f->group[f->ngroups++], order + a, b - a);
        a = b;
    }
    free(order);
    o->flat = f;
}

void optim_flat_free(struct optim_flat *f) {
    if (!f) return;
    for (int i = 0; i < f->ngroups; i++) {
        optim_flat_group *G = &f->group[i];
        storage_release(G->p16);
        storage_release(G->p);
        storage_release(G->g);
        storage_release(G->m);
        storage_release(G->v);
        free(G->index);
        free(G->off);
        free(G->spans);
    }
    free(f);
}

optim_flat_group *optim_flat_group_of(const optimizer *o, int device) {
    if (!o->flat) return NULL;
    for (int i = 0; i < o->flat->ngroups; i++)
        if (o->flat->group[i].device == device) return &o->flat->group[i];
    return NULL;
}
