/* ops_attention_bf16.c — attention on bf16 q, k, v (issue #27): o bf16, lse fp32, bf16 compute
 * (GEMM_COMPUTE_BF16, fp32 softmax and accumulation).
 *
 * The backend's attention_bf16 / attention_bf16_backward (kernels/ops.def) run on the bf16 tensors
 * where they have a kernel for the call: no mask, head dims the fused kernels take (the CPU's
 * AVX512_BF16 kernels; CUDA's tensor-core path for the MAE encoder's and decoder's short heads).
 * Otherwise (masks, a CPU without AVX512_BF16, CUDA's cuBLAS path, an input given twice) the op
 * widens q, k, v (exact) into fp32 arena scratch, runs the fp32-storage kernel in bf16 compute
 * (which rounds q, k, v to bf16: the identity on these values) and rounds o once to nearest even.
 * Both give the same bits: o and lse are the fp32 op's on the same values in bf16 compute, o
 * rounded. The fp32 copies are temporaries: the tape keeps the bf16 q, k, v and o (half the bytes of
 * fp32 ones) and the backward widens them again.
 *
 * Backward, widening: q, k, v, the saved bf16 o and the incoming bf16 gradient of o widened; dq, dk,
 * dv computed into zeroed fp32 scratch by the fp32-storage backward, then each added into its bf16
 * gradient once, round(old + new) (a fresh buffer: round(new)); a tensor given twice (q as the key
 * too) sums its fp32 parts first. The kernel's row term delta_i = sum_d dO_id O_id reads the saved
 * bf16 O (as flash-attention's backward reads its stored output), not the fp32 O it was rounded
 * from. */
#include "nn/ops_attention_internal.h"
#include "nn/ops_util.h"

/* Whether t's elements fill tensor_numel(t) consecutive slots from t->raw: packed, or packed in
 * another dim order (o's [B, Tq, H, D] storage seen as [B, H, Tq, D]). */
static int dense(const tensor *t) {
    int64_t sh[T_MAX_DIMS], st[T_MAX_DIMS], want = 1;
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1) continue;
        if (t->stride[i] <= 0) return 0;
        int j = n++; /* insertion by stride */
        while (j > 0 && st[j - 1] > t->stride[i]) sh[j] = sh[j - 1], st[j] = st[j - 1], j--;
        sh[j] = t->shape[i], st[j] = t->stride[i];
    }
    for (int i = 0; i < n; i++) {
        if (st[i] != want) return 0;
        want *= sh[i];
    }
    return 1;
}

/* fp32 copy of the bf16 [B, H, T, D] tensor t in arena scratch (exact); s gets its (b, h, t)
 * strides. A dense t is widened in one cast and keeps its strides; another view (q, k, v sliced
 * out of a packed qkv) is widened into a packed copy in one pass (cast_strided). */
static const float *widen(const tensor *t, int64_t *s) {
    const er_backend *be = BE(t);
    const int64_t n = tensor_numel(t);
    float *y = ops_scratch(t->device, n);
    if (n == 0 || dense(t)) {
        if (n) be->cast(n, ER_BF16, t->raw, ER_F32, y, 0);
        attn_strides3(t, s);
        return y;
    }
    const int64_t ps[4] = {t->shape[1] * t->shape[2] * t->shape[3], t->shape[2] * t->shape[3], t->shape[3], 1};
    be->cast_strided(4, t->shape, ER_BF16, t->raw, t->stride, ER_F32, y, ps, 0);
    s[0] = ps[0], s[1] = ps[1], s[2] = ps[2];
    return y;
}

void attention_bf16_forward(const attn_ctx *c, int B, int H, int Tq, int Tk, int D, float scale, const tensor *q,
                            const tensor *k, const tensor *v, tensor *o, float *work) {
    const er_backend *be = BE(q);
    int64_t qs[3], ks[3], vs[3], os[3];
    if (c->mask_kind == MASK_NONE) { /* the backend's kernel on the bf16 tensors themselves, where it has one */
        attn_strides3(q, qs), attn_strides3(k, ks), attn_strides3(v, vs), attn_strides3(o, os);
        if (be->attention_bf16(B, H, Tq, Tk, D, scale, q->raw, qs, k->raw, ks, v->raw, vs, o->raw, os, c->lse, work)) return;
    }
    const float *qf = widen(q, qs), *kf = widen(k, ks), *vf = widen(v, vs);
    const int64_t no = tensor_numel(o);
    float *of = ops_scratch(q->device, no); /* o's (dense) layout in fp32 */
    attn_strides3(o, os);
    be->attention(c->compute, B, H, Tq, Tk, D, scale, qf, qs, kf, ks, vf, vs, c->mask_kind,
                  c->mask ? c->mask->data : NULL, c->ms, of, os, c->lse, work);
    if (no) be->cast(no, ER_F32, of, ER_BF16, o->raw, 0);
}

void attention_bf16_backward(tape_node *n) {
    tensor *in[3] = {n->in[0], n->in[1], n->in[2]}, *o = n->out;
    const attn_ctx *c = n->ctx;
    const int B = (int)o->shape[0], H = (int)o->shape[1], Tq = (int)o->shape[2], Tk = (int)in[1]->shape[2];
    const int D = (int)o->shape[3];
    /* the gradient buffers first (the scratch below is released at the end, with everything the
     * arena gave after the mark); first[i]: where in[i] appeared first among q, k, v. As the fp32
     * op, a view of a packed qkv sends its gradient straight into the base's (attn_grad_dest), so
     * the views' backward copies are skipped; otherwise its own packed buffer. */
    void *g[3] = {NULL, NULL, NULL};
    int went[3] = {0, 0, 0}, first[3], nd = 0, made[3] = {0, 0, 0};
    int64_t ds[3][3] = {{0}};
    tensor *direct[3] = {NULL, NULL, NULL}, *base[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        first[i] = i;
        for (int j = i - 1; j >= 0; j--)
            if (in[j] == in[i]) first[i] = j;
        if (first[i] != i) continue;
        g[i] = attn_grad_dest(in[i], ds[i], direct, nd, &went[i], &base[i], &made[i]);
        if (went[i]) direct[nd++] = in[i];
    }
    /* A base gradient made just now (uninitialised) that q, k and v cover between them (disjoint
     * views, as `direct` ensures, whose sizes add up to the base's: the packed qkv of a ViT block)
     * is written by the direct kernel instead of zero-filled and added into. Any other new base is
     * zero-filled now, as grad_buf would have. */
    const int three = c->mask_kind == MASK_NONE && first[1] == 1 && first[2] == 2;
    const int write = three && made[0] && base[1] == base[0] && base[2] == base[0] &&
                      tensor_numel(in[0]) + tensor_numel(in[1]) + tensor_numel(in[2]) == tensor_numel(base[0]);
    for (int i = 0; i < 3; i++)
        if (made[i] && !write) tensor_fill(base[i]->grad, 0.0f);
    const er_backend *be = BE(o);
    arena_mark mk = ops_mark(o->device);
    int64_t xs[3][3], gs[3][3], os[3], gos[3];
    if (three) { /* three tensors: the direct kernel, if any */
        for (int i = 0; i < 3; i++) attn_strides3(in[i], xs[i]);
        attn_strides3(o, os), attn_strides3(o->grad, gos);
        float *work = ops_scratch(o->device, (int64_t)be->attention_workspace(c->compute, B, H, Tq, Tk, D));
        if (be->attention_bf16_backward(B, H, Tq, Tk, D, n->f[0], in[0]->raw, xs[0], in[1]->raw, xs[1], in[2]->raw, xs[2],
                                        o->raw, os, o->grad->raw, gos, c->lse, g[0], ds[0], g[1], ds[1], g[2], ds[2],
                                        !write, work)) {
            ops_release(o->device, mk);
            return;
        }
        ops_release(o->device, mk);
        if (write) tensor_fill(base[0]->grad, 0.0f); /* declined: the widening path below adds */
    }
    const float *x[3];
    float *gf[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) x[i] = widen(in[i], xs[i]);
    const float *of = widen(o, os), *gof = widen(o->grad, gos);
    for (int i = 0; i < 3; i++) {
        if (!g[first[i]]) continue;
        const int64_t T = in[i]->shape[2], ne = tensor_numel(in[i]);
        gf[i] = ops_scratch(o->device, ne);
        if (ne) be->fill(gf[i], ne, 0.0f); /* the kernel adds */
        gs[i][0] = H * T * D, gs[i][1] = T * D, gs[i][2] = D;
    }
    float *work = ops_scratch(o->device, (int64_t)be->attention_workspace(c->compute, B, H, Tq, Tk, D));
    be->attention_backward(c->compute, B, H, Tq, Tk, D, n->f[0], x[0], xs[0], x[1], xs[1], x[2], xs[2], c->mask_kind,
                           c->mask ? c->mask->data : NULL, c->ms, of, os, gof, gos, c->lse, gf[0], gs[0], gf[1],
                           gs[1], gf[2], gs[2], work);
    for (int i = 0; i < 3; i++) { /* a repeated input: its fp32 parts summed before the one rounding */
        const int64_t ne[1] = {tensor_numel(in[i])}, one[1] = {1};
        if (gf[i] && first[i] != i && ne[0]) be->copy_strided(1, ne, gf[i], one, gf[first[i]], one, 1);
    }
    /* each added once, round(old + new): into the base at x's strides, or x's own packed buffer */
    for (int i = 0; i < 3; i++) {
        const int64_t ne = tensor_numel(in[i]);
        if (!g[i] || !ne) continue;
        if (went[i]) {
            const int64_t ps[4] = {gs[i][0], gs[i][1], gs[i][2], 1};
            be->cast_strided(4, in[i]->shape, ER_F32, gf[i], ps, in[i]->dtype, g[i], in[i]->stride, 1);
        } else {
            be->cast(ne, ER_F32, gf[i], in[i]->dtype, g[i], 1);
        }
    }
    ops_release(o->device, mk);
}
