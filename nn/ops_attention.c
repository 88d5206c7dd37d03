/* ops_attention.c — multi-head scaled dot-product attention, softmax(Q K^T * scale + mask) V.
 * The kernel keeps one head's score block at a time and the backward recomputes it (see
 * kernels/cpu/attention.c); q/k/v may be strided views of one packed qkv projection. q, k, v
 * are fp32, or all bf16 (ops_attention_bf16.c: o bf16, bf16 compute). */
#include <math.h>
#include <string.h>

#include "nn/ops_attention_internal.h"
#include "nn/ops_util.h"

/* Pure views (ops_shape.c): their output is x's storage seen with other strides, and their backward
 * only moves the gradient back into x's gradient at the same element positions. */
static int is_view_node(const tape_node *n) {
    static const char *const views[] = {"squeeze", "unsqueeze", "slice", "permute", "reshape"};
    if (!n || n->nin != 1) return 0;
    for (size_t i = 0; i < sizeof views / sizeof *views; i++)
        if (!strcmp(n->op, views[i])) return 1;
    return 0;
}

/* Where to add x's gradient, with x's own strides. When x is a chain of pure views over a packed
 * tensor `base` (q/k/v sliced out of one qkv projection: squeeze(slice(permute(reshape(qkv))))),
 * its gradient goes straight into base's packed gradient buffer at x's offset: base's gradient
 * has base's layout, so x's strides address it as they address base's data. The views in between
 * then receive no gradient and their backward is skipped (no zero-filled [B,H,T,D] buffers, no
 * slice and permute copies). base may already have a gradient (q's, written just before k's and
 * v's; or another consumer's): the kernel adds, and an existing buffer is always initialised.
 * (Requiring none sent k and v through their own buffers, two slice copies, a zero-filled
 * [3,B,H,T,D] buffer and its permute copy per block.) Otherwise x's own (packed) gradient. */
/* Whether offset d is a sum of e_i st[i] with |e_i| < sh[i] over dims [0, n) sorted by stride
 * (each stride above what the smaller ones span: then at most two e_i per dim can work). */
static int reachable(int64_t d, const int64_t *sh, const int64_t *st, int n) {
    if (n == 0) return d == 0;
    int64_t below = 0; /* what dims [0, n - 1) can add up to */
    for (int i = 0; i < n - 1; i++) below += (sh[i] - 1) * st[i];
    int64_t e0 = d >= 0 ? d / st[n - 1] : -((-d + st[n - 1] - 1) / st[n - 1]); /* floor */
    for (int64_t e = e0; e <= e0 + 1; e++) {
        int64_t r = d - e * st[n - 1];
        if (e > -sh[n - 1] && e < sh[n - 1] && r <= below && r >= -below && reachable(r, sh, st, n - 1)) return 1;
    }
    return 0;
}

/* Whether two views share an element. Exact for views of one shape and one set of nested strides
 * (q, k, v cut from one packed projection: offsets H D apart, never reachable); otherwise
 * whether their address spans overlap. */
static int views_overlap(const tensor *a, const tensor *b) {
    int64_t sh[T_MAX_DIMS], st[T_MAX_DIMS], span = 0;
    int n = 0, same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i] && a->stride[i] == b->stride[i];
    for (int i = 0; same && i < a->ndim; i++) {
        if (a->shape[i] == 1) continue;
        int j = n++; /* insertion by stride */
        while (j > 0 && st[j - 1] > a->stride[i]) sh[j] = sh[j - 1], st[j] = st[j - 1], j--;
        sh[j] = a->shape[i], st[j] = a->stride[i];
    }
    for (int i = 0; same && i < n; i++) {
        same = st[i] > span; /* nested */
        span += (sh[i] - 1) * st[i];
    }
    const int64_t es = (int64_t)tensor_elsize(a);
    if (same && a->dtype == b->dtype) return reachable(((const char *)b->raw - (const char *)a->raw) / es, sh, st, n);
    const char *ae = a->raw, *be = b->raw;
    for (int i = 0; i < a->ndim; i++) ae += (a->shape[i] - 1) * a->stride[i] * es;
    for (int i = 0; i < b->ndim; i++) be += (b->shape[i] - 1) * b->stride[i] * (int64_t)tensor_elsize(b);
    return (const char *)a->raw <= be && (const char *)b->raw <= ae;
}

/* `direct` lists the operands whose gradients already go straight into a base: x may not share
 * memory with them (q given as key too would make gq and gk alias, against the kernels' contract
 * of disjoint views), so it takes its own buffer then. *went says which way x went. With `fresh`
 * given, a base gradient created by this call is left uninitialised and *fresh = 1 (the caller
 * writes all of it or fills it); *base_out is the base x went into. */
void *attn_grad_dest(tensor *x, int64_t *s, tensor *const *direct, int ndirect, int *went, tensor **base_out,
                     int *fresh) {
    *went = 0;
    if (fresh) *fresh = 0, *base_out = NULL;
    if (!(x->flags & T_REQUIRES_GRAD)) return NULL;
    tensor *base = x;
    while (base->node && is_view_node(base->node) && !base->grad) base = base->node->in[0];
    int clash = 0;
    for (int i = 0; i < ndirect; i++) clash |= views_overlap(x, direct[i]);
    const int64_t es = (int64_t)tensor_elsize(x), at = ((const char *)x->raw - (const char *)base->raw) / es;
    if (base != x && !clash && base->dtype == x->dtype && tensor_is_contiguous(base) &&
        (base->flags & T_REQUIRES_GRAD) && at >= 0 && at < tensor_numel(base)) {
        int made = 0;
        tensor *gb = fresh ? grad_buf_fresh(base, &made) : grad_buf(base);
        if (gb && tensor_is_contiguous(gb) && gb->dtype == x->dtype) {
            attn_strides3(x, s);
            *went = 1;
            if (fresh) *fresh = made, *base_out = base;
            return (char *)gb->raw + at * es;
        }
        if (made) tensor_fill(gb, 0.0f); /* not written through x: initialised as grad_buf does */
    }
    tensor *g = grad_buf(x);
    if (g) attn_strides3(g, s);
    return g ? g->raw : NULL;
}

static void attention_backward(tape_node *n) {
    tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *o = n->out;
    attn_ctx *c = n->ctx;
    int B = (int)q->shape[0], H = (int)q->shape[1], Tq = (int)q->shape[2], Tk = (int)k->shape[2];
    int D = (int)q->shape[3];
    int64_t qs[3], ks[3], vs[3], os[3], gos[3], gqs[3], gks[3], gvs[3];
    attn_strides3(q, qs);
    attn_strides3(k, ks);
    attn_strides3(v, vs);
    attn_strides3(o, os);
    attn_strides3(o->grad, gos);
    tensor *direct[2] = {NULL, NULL};
    int nd = 0, went;
    float *gq = attn_grad_dest(q, gqs, direct, nd, &went, NULL, NULL);
    if (went) direct[nd++] = q;
    float *gk = attn_grad_dest(k, gks, direct, nd, &went, NULL, NULL);
    if (went) direct[nd++] = k;
    float *gv = attn_grad_dest(v, gvs, direct, nd, &went, NULL, NULL);
    const er_backend *be = BE(q);
    arena_mark m = ops_mark(q->device);
    float *work = ops_scratch(q->device, (int64_t)be->attention_workspace(c->compute, B, H, Tq, Tk, D));
    be->attention_backward(c->compute, B, H, Tq, Tk, D, n->f[0], q->data, qs, k->data, ks, v->data, vs,
                           c->mask_kind, c->mask ? c->mask->data : NULL, c->ms, o->data, os,
                           o->grad->data, gos, c->lse, gq, gqs, gk, gks, gv, gvs, work);
    ops_release(q->device, m);
}

static tensor *unit_last(tensor *t) { return t && t->stride[3] != 1 && t->shape[3] > 1 ? op_clone(t) : t; }

tensor *op_attention(tensor *q, tensor *k, tensor *v, tensor *mask, int mask_kind, float scale) {
    OPS_F32("attention", mask);
    if (!q || !k || !v) return NULL;
    if (q->dtype != k->dtype || q->dtype != v->dtype) {
        er_fail(ER_INPUT, "attention: q, k and v must have one dtype (fp32 or bf16), got q %s, k %s, v %s (cast with op_cast)",
                er_dtype_name(q->dtype), er_dtype_name(k->dtype), er_dtype_name(v->dtype));
        return NULL;
    }
    const int bf16 = q->dtype == DT_BF16;
    char s0[96], s1[96], s2[96];
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || k->shape[0] != q->shape[0] ||
        v->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] || v->shape[1] != q->shape[1] ||
        k->shape[3] != q->shape[3] || v->shape[3] != q->shape[3] || v->shape[2] != k->shape[2]) {
        er_fail(ER_INPUT, "attention: q %s, k %s, v %s: need [B,H,Tq,D], [B,H,Tk,D], [B,H,Tk,D]",
                ops_shape(q, s0), ops_shape(k, s1), ops_shape(v, s2));
        return NULL;
    }
    int B = (int)q->shape[0], H = (int)q->shape[1], Tq = (int)q->shape[2], Tk = (int)k->shape[2];
    int D = (int)q->shape[3];
    if (mask_kind != MASK_NONE && !mask) mask_kind = MASK_NONE;
    int64_t ms[4] = {0, 0, 0, 0};
    if (mask_kind != MASK_NONE) {
        const int64_t want[4] = {B, H, Tq, Tk};
        int ok = mask->ndim >= 2 && mask->ndim <= 4;
        for (int i = 0; ok && i < mask->ndim; i++) {
            int d = 4 - mask->ndim + i;
            int64_t m = mask->shape[i];
            if (m != want[d] && m != 1) ok = 0;
            ms[d] = m == 1 ? 0 : mask->stride[i];
        }
        if (!ok) {
            er_fail(ER_INPUT, "attention: mask %s does not broadcast to [%d, %d, %d, %d]",
                    ops_shape(mask, s0), B, H, Tq, Tk);
            return NULL;
        }
    }
    if (scale <= 0) scale = 1.0f / sqrtf((float)D);
    q = unit_last(q);
    k = unit_last(k);
    v = unit_last(v);
    /* stored as [B, Tq, H, D] and returned as the [B, H, Tq, D] view: the usual
     * transpose(1, 2) + reshape to [B, Tq, H * D] that follows is then free */
    tensor *ob = ops_new_dt(q, 4, SHAPE(B, Tq, H, D));
    tensor *o = tensor_view(ob, 4, SHAPE(B, H, Tq, D), SHAPE(ob->stride[0], ob->stride[2], ob->stride[1], 1), 0);
    const er_backend *be = BE(q);
    attn_ctx *c = arena_alloc_host(arena_default(q->device), sizeof *c);
    c->mask = mask_kind ? mask : NULL;
    c->mask_kind = mask_kind;
    for (int i = 0; i < 4; i++) c->ms[i] = ms[i];
    c->lse = ops_scratch(q->device, (int64_t)B * H * Tq);
    c->compute = bf16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32; /* its operands decide */
    arena_mark m = ops_mark(q->device);
    float *work = ops_scratch(q->device, (int64_t)be->attention_workspace(c->compute, B, H, Tq, Tk, D));
    if (bf16) {
        attention_bf16_forward(c, B, H, Tq, Tk, D, scale, q, k, v, o, work);
    } else {
        int64_t qs[3], ks[3], vs[3], os[3];
        attn_strides3(q, qs);
        attn_strides3(k, ks);
        attn_strides3(v, vs);
        attn_strides3(o, os);
        be->attention(c->compute, B, H, Tq, Tk, D, scale, q->data, qs, k->data, ks, v->data, vs, mask_kind,
                      c->mask ? c->mask->data : NULL, ms, o->data, os, c->lse, work);
    }
    ops_release(q->device, m);
    tensor *in[3] = {q, k, v};
    tape_node *n = tape_record("attention", bf16 ? attention_bf16_backward : attention_backward, o, 3, in);
    if (n) {
        n->ctx = c;
        n->f[0] = scale;
    }
    return o;
}
