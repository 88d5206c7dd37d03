/* The optimizer's flat buffers (nn/optim_flat.c): parameters, gradients and moments in one
 * allocation per device with the tensors as aligned views, grouped so that alike tensors form
 * one span; updates bit-identical to tensors updated on their own; the padding stays zero; a
 * parameter that cannot be moved (a view, no gradient) is updated where it is. */
#include <math.h>
#include <string.h>

#include "nn/base/base.h"
#include "nn/optim.h"
#include "nn/optim_flat.h"
#include "tests/test_util.h"

/* Deterministic values in [-1, 1) for element i of tensor k. */
static float val(int k, int64_t i, int salt) { return (float)(((k * 131 + i * 29 + salt * 7) % 97) - 48) / 48.0f; }

static void fill_param(tensor *p, int k) {
    for (int64_t i = 0; i < tensor_numel(p); i++) p->data[i] = val(k, i, 0);
}

static void fill_grad(tensor *p, int k, int step) {
    for (int64_t i = 0; i < tensor_numel(p); i++) p->grad->data[i] = val(k, i, step + 1);
}

/* weights and biases interleaved, as a model lists them: decay, no-decay, decay, ... */
static void make_model(param_list *pl) {
    static const char *names[] = {"a.weight", "a.bias", "b.weight", "b.bias", "norm.weight", "c.weight"};
    static const int64_t rows[] = {5, 1, 7, 1, 1, 3}, cols[] = {3, 5, 9, 7, 9, 70};
    for (int k = 0; k < 6; k++) {
        tensor *p = rows[k] == 1 ? tensor_param(names[k], 1, SHAPE(cols[k])) : tensor_param(names[k], 2, SHAPE(rows[k], cols[k]));
        fill_param(p, k);
        params_add(pl, p);
    }
}

Test(optim_flat, one_allocation_aligned_views_two_spans) {
    param_list pl = {0};
    make_model(&pl);
    optim_config cfg = {.kind = OPTIM_ADAMW, .lr = 1e-2, .weight_decay = 0.05};
    optimizer *o = optim_new(&cfg, &pl);
    cr_assert_not_null(o, "%s", er_msg());
    optim_flat_group *G = optim_flat_group_of(o, DEV_CPU);
    cr_assert_not_null(G, "no flat buffers made");
    cr_expect_eq(G->count, 6);
    for (int i = 0; i < o->n; i++) {
        const optim_param *q = &o->ps[i];
        cr_expect(q->flat, "%s not flat", q->p->name);
        cr_expect_eq(q->p->storage, G->p, "%s: weights not in the flat buffer", q->p->name);
        cr_expect_eq(q->p->grad->storage, G->g, "%s: gradient not in the flat buffer", q->p->name);
        cr_expect_eq(q->m->storage, G->m);
        cr_expect_eq(q->v->storage, G->v);
        cr_expect_eq(q->p->offset % 64, 0, "%s at offset %lld: not 256-byte aligned", q->p->name, (long long)q->p->offset);
        cr_expect(q->p->offset == q->p->grad->offset && q->p->offset == q->m->offset && q->p->offset == q->v->offset,
                  "%s: the four buffers do not share one layout", q->p->name);
        for (int64_t e = 0; e < tensor_numel(q->p); e++)
            cr_assert_eq(q->p->data[e], val(i, e, 0), "%s[%lld]: value changed by the move", q->p->name, (long long)e);
    }
    /* decayed tensors first, then the exempt ones: two spans for the six tensors */
    cr_expect_eq(optim_flat_spans(o, G), 2, "spans: %d", optim_flat_spans(o, G));
    cr_expect_eq(G->spans[0].wd, 0.05f);
    cr_expect_eq(G->spans[1].wd, 0.0f);
    /* a changed lr multiplier splits a span: c.weight, last of the decayed run, gets its own */
    o->ps[5].lr_scale = 0.5f;
    cr_expect_eq(optim_flat_spans(o, G), 3);
    o->ps[5].lr_scale = 1.0f;
    o->ps[2].lr_scale = 0.5f; /* b.weight, in the middle: [a] [b] [c] [exempt] */
    cr_expect_eq(optim_flat_spans(o, G), 4);
    float **g = malloc(sizeof(float *) * (size_t)optim_grad_buffers_max(o));
    int64_t *n = malloc(sizeof(int64_t) * (size_t)optim_grad_buffers_max(o));
    cr_expect_eq(optim_grad_buffers(o, g, n), 1, "the all-reduce gets one buffer");
    cr_expect_eq(g[0], (float *)G->g->data);
    cr_expect_eq(n[0], G->numel);
    free(g), free(n);
    /* the model goes first: the optimizer still holds the buffers (ASan checks the order) */
    params_free(&pl);
    optim_free(o);
}

/* The same updates as each tensor updated on its own (a loose entry: storage it does not own), bit
 * for bit, for AdamW with weight decay and for SGD with Nesterov momentum; the padding stays 0. */
static void check_against_loose(const optim_config *cfg, const char *what) {
    param_list flat = {0}, loose = {0};
    make_model(&flat);
    optimizer *of = optim_new(cfg, &flat);
    optimizer **ol = calloc((size_t)flat.n, sizeof *ol);
    param_list *one = calloc((size_t)flat.n, sizeof *one);
    tensor **hold = calloc((size_t)flat.n, sizeof *hold);
    for (int k = 0; k < flat.n; k++) {
        /* a parameter viewing shared storage: not eligible, updated where it is */
        const tensor *f = flat.t[k];
        er_storage *st = storage_new(DEV_CPU, DT_F32, tensor_numel(f) + 3);
        tensor *p = tensor_in_storage(st, DT_F32, 3, f->ndim, f->shape);
        hold[k] = tensor_in_storage(st, DT_F32, 0, 1, SHAPE(3));
        storage_release(st);
        p->flags |= T_PARAM | T_REQUIRES_GRAD;
        p->name = xstrdup(f->name);
        p->grad = tensor_new(f->ndim, f->shape);
        fill_param(p, k);
        params_add(&loose, p);
        params_add(&one[k], p);
        ol[k] = optim_new(cfg, &one[k]);
        cr_assert_not_null(ol[k], "%s", er_msg());
        cr_assert_not(ol[k]->ps[0].flat, "a view was moved into a flat buffer");
    }
    for (int step = 0; step < 4; step++) {
        for (int k = 0; k < flat.n; k++) {
            fill_grad(flat.t[k], k, step);
            fill_grad(loose.t[k], k, step);
        }
        optim_set_lr(of, cfg->lr * (1 + step));
        cr_assert_eq(optim_step(of), ER_OK);
        for (int k = 0; k < flat.n; k++) {
            optim_set_lr(ol[k], cfg->lr * (1 + step));
            cr_assert_eq(optim_step(ol[k]), ER_OK);
        }
        optim_zero_grad(of);
    }
    for (int k = 0; k < flat.n; k++) {
        cr_expect_eq(memcmp(flat.t[k]->data, loose.t[k]->data, (size_t)tensor_numel(flat.t[k]) * sizeof(float)), 0,
                     "%s: %s differs from its update on its own", what, flat.t[k]->name);
        for (int64_t e = 0; e < tensor_numel(flat.t[k]); e++)
            cr_assert_eq(flat.t[k]->grad->data[e], 0.0f, "%s: zero_grad missed %s", what, flat.t[k]->name);
    }
    const optim_flat_group *G = optim_flat_group_of(of, DEV_CPU);
    int64_t zeros_in_padding = 0, padding = 0;
    for (int64_t e = 0; e < G->numel; e++) {
        int inside = 0;
        for (int k = 0; k < flat.n; k++)
            inside |= e >= flat.t[k]->offset && e < flat.t[k]->offset + tensor_numel(flat.t[k]);
        if (inside) continue;
        padding++;
        const float *bufs[] = {G->p->data, G->m ? G->m->data : NULL, G->v ? G->v->data : NULL};
        int zero = 1;
        for (int b = 0; b < 3; b++) zero &= !bufs[b] || bufs[b][e] == 0.0f;
        zeros_in_padding += zero;
    }
    cr_expect_gt(padding, 0, "no padding to check");
    cr_expect_eq(zeros_in_padding, padding, "%s: padding between tensors is no longer zero", what);
    for (int k = 0; k < flat.n; k++) {
        optim_free(ol[k]);
        free(one[k].t);
        tensor_free(hold[k]);
    }
    free(ol), free(one), free(hold);
    optim_free(of);
    params_free(&flat);
    params_free(&loose);
}

Test(optim_flat, updates_equal_each_tensor_on_its_own) {
    optim_config adamw = {.kind = OPTIM_ADAMW, .lr = 1e-2, .weight_decay = 0.05};
    check_against_loose(&adamw, "adamw");
    optim_config nag = {.kind = OPTIM_SGD, .lr = 5e-2, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = 1};
    check_against_loose(&nag, "sgd");
    optim_config plain = {.kind = OPTIM_SGD, .lr = 5e-2, .weight_decay = 1e-3};
    check_against_loose(&plain, "sgd without momentum");
}

/* Frozen, or without a gradient buffer: left where it is (and a frozen one gets no
 * state); the rest still share one buffer, and everything is updated. */
Test(optim_flat, ineligible_tensors_stay_put) {
    param_list pl = {0};
    tensor *a = tensor_param("a.weight", 2, SHAPE(4, 4)), *b = tensor_param("b.weight", 2, SHAPE(2, 2));
    tensor *frozen = tensor_param("f.weight", 2, SHAPE(3, 3)), *nograd = tensor_param("n.weight", 1, SHAPE(5));
    tensor_set_requires_grad(frozen, 0);
    tensor_free(nograd->grad);
    nograd->grad = NULL;
    params_add(&pl, a), params_add(&pl, b), params_add(&pl, frozen), params_add(&pl, nograd);
    er_storage *frozen_st = frozen->storage, *nograd_st = nograd->storage;
    optim_config cfg = {.kind = OPTIM_SGD, .lr = 0.1};
    optimizer *o = optim_new(&cfg, &pl);
    cr_assert_not_null(o, "%s", er_msg());
    cr_expect_eq(a->storage, b->storage, "a and b should share the flat buffer");
    cr_expect_eq(frozen->storage, frozen_st, "a frozen parameter was moved");
    cr_expect_eq(nograd->storage, nograd_st, "a parameter without a gradient was moved");
    for (int i = 0; i < 16; i++) a->grad->data[i] = 1.0f;
    for (int i = 0; i < 4; i++) b->grad->data[i] = 2.0f;
    cr_assert_eq(optim_step(o), ER_OK);
    cr_expect_float_eq(a->data[0], -0.1f, 1e-7);
    cr_expect_float_eq(b->data[3], -0.2f, 1e-7);
    cr_expect_eq(nograd->data[0], 0.0f, "no gradient: nothing to apply");
    optim_free(o);
    params_free(&pl);
}

/* optim_config.bf16_weights: each step writes every flat parameter's bf16 copy (tensor.bf16) in its
 * update pass, the parameter rounded to nearest even, and marks it fresh; the fp32 update is the
 * same bits as without copies; a write through the tensor API marks the copy stale; the copies
 * outlive optim_free (params_free frees them; under ASan either order is checked). AdamW and SGD. */
static void check_bf16_copies(optim_kind kind) {
    param_list a = {0}, b = {0};
    make_model(&a);
    make_model(&b);
    optim_config cfg = {.kind = kind, .lr = 1e-2, .weight_decay = 0.05, .momentum = kind == OPTIM_SGD ? 0.9 : 0};
    optimizer *plain = optim_new(&cfg, &a);
    cfg.bf16_weights = 1;
    optimizer *o = optim_new(&cfg, &b);
    cr_assert(plain && o, "%s", er_msg());
    for (int k = 0; k < b.n; k++) {
        cr_assert_not_null(b.t[k]->bf16, "%s has no bf16 copy", b.t[k]->name);
        cr_assert_not(b.t[k]->flags & T_BF16_FRESH, "%s: a copy is fresh before any step wrote it", b.t[k]->name);
        cr_assert_null(a.t[k]->bf16);
    }
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < b.n; k++) fill_grad(a.t[k], k, step), fill_grad(b.t[k], k, step);
        cr_assert_eq(optim_step(plain), ER_OK);
        cr_assert_eq(optim_step(o), ER_OK);
        for (int k = 0; k < b.n; k++) {
            const tensor *p = b.t[k];
            cr_assert(p->flags & T_BF16_FRESH, "step %d: %s's copy not marked fresh", step, p->name);
            cr_assert_eq(memcmp(p->data, a.t[k]->data, (size_t)tensor_numel(p) * 4), 0, "%s: the update changed", p->name);
            const uint16_t *h = p->bf16->raw;
            for (int64_t e = 0; e < tensor_numel(p); e++)
                cr_assert_eq(h[e], er_f32_to_bf16(p->data[e]), "step %d: %s[%lld] copy 0x%04x, rounded 0x%04x", step,
                             p->name, (long long)e, h[e], er_f32_to_bf16(p->data[e]));
        }
    }
    tensor_fill(b.t[0], 0.5f);
    cr_assert_not(b.t[0]->flags & T_BF16_FRESH, "a write through the API left the copy fresh");
    cr_assert(b.t[1]->flags & T_BF16_FRESH);
    optim_free(o); /* the copies stay with the parameters (the buffer is refcounted), still right */
    for (int k = 1; k < b.n; k++)
        cr_assert(b.t[k]->bf16 && ((uint16_t *)b.t[k]->bf16->raw)[0] == er_f32_to_bf16(b.t[k]->data[0]), "%s", b.t[k]->name);
    optim_free(plain);
    params_free(&a);
    params_free(&b);
}

Test(optim_flat, bf16_copies_written_by_each_step) {
    check_bf16_copies(OPTIM_ADAMW);
    check_bf16_copies(OPTIM_SGD);
}
