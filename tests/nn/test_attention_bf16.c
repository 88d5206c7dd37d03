/* Attention on bf16 q, k, v (nn/ops_attention_bf16.c) against the fp32 op on the same values.
 *
 * The rule: with q, k, v holding bf16 values, the bf16 op is exactly the CPU kernel in bf16 compute
 * on fp32 operands (which rounds q, k, v to bf16, the identity here): o is the fp32 op's o rounded once to nearest
 * even, lse is equal, and the gradients of q, k, v are the fp32 op's rounded once. The reference
 * backward reads the rounded o (the test rounds the kernel's output before its backward),
 * because that is what the bf16 op keeps and what its backward's row term sum_d dO O reads.
 * Checked bit for bit on both CPU paths (D = 64: the fused kernel where the CPU has AVX512_BF16;
 * D = 24 and masked heads: the unfused one), on q/k/v sliced out of a permuted [B, T, 3, H, D]
 * projection (the ViT block's layout) and on separate tensors with Tq != Tk. Also: a bf16 input
 * used twice accumulates round(old + new), and a dtype mix is refused naming the op. */
#include <math.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/ops.h"
#include "nn/ops_attention_internal.h"
#include "kernels/backend.h"
#include "kernels/gemm.h"
#include "kernels/profile.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static float rbf(float x) { return er_bf16_to_f32(er_f32_to_bf16(x)); }

/* a long-lived fp32 leaf holding bf16-representable values */
static tensor *bf16_values(int ndim, const int64_t *shape, uint64_t seed, float lo, float hi) {
    tensor *t = gc_rand(ndim, shape, seed, lo, hi);
    for (int64_t i = 0; i < tensor_numel(t); i++) t->data[i] = rbf(t->data[i]);
    return t;
}

static float *host(const tensor *t) {
    float *h = xmalloc((size_t)(tensor_numel(t) ? tensor_numel(t) : 1) * sizeof(float));
    tensor_to_host(t, h); /* widened when bf16 */
    return h;
}

typedef struct {
    int B, H, Tq, Tk, D, packed, mask_kind;
} acase;

/* The case's leaves: packed: one [B, T, 3, H, D] qkv (Tq = Tk = T); else q, k, v. */
static int make_leaves(const acase *a, uint64_t seed, tensor **leaf) {
    if (a->packed) {
        leaf[0] = bf16_values(5, SHAPE(a->B, a->Tq, 3, a->H, a->D), seed, -2, 2);
        return 1;
    }
    leaf[0] = bf16_values(4, SHAPE(a->B, a->H, a->Tq, a->D), seed, -2, 2);
    leaf[1] = bf16_values(4, SHAPE(a->B, a->H, a->Tk, a->D), seed + 1, -2, 2);
    leaf[2] = bf16_values(4, SHAPE(a->B, a->H, a->Tk, a->D), seed + 2, -2, 2);
    return 3;
}

/* q, k, v from the leaves, cast to bf16 first when `bf16`; packed: the ViT block's permute + slices */
static void qkv_of(const acase *a, tensor *const *leaf, int bf16, tensor **qkv) {
    if (a->packed) {
        int perm[5] = {2, 0, 3, 1, 4};
        tensor *p = op_permute(bf16 ? op_cast(leaf[0], DT_BF16) : leaf[0], perm); /* [3, B, H, T, D] */
        for (int i = 0; i < 3; i++) qkv[i] = op_squeeze(op_slice(p, 0, i, i + 1), 0);
        return;
    }
    for (int i = 0; i < 3; i++) qkv[i] = bf16 ? op_cast(leaf[i], DT_BF16) : leaf[i];
}

static tensor *mask_of(const acase *a, uint64_t seed) {
    if (a->mask_kind == MASK_NONE) return NULL;
    tensor *m = tensor_new(2, SHAPE(a->Tq, a->Tk)); /* broadcast over B, H */
    rng_t r = rng_make(seed, 3);
    for (int64_t i = 0; i < (int64_t)a->Tq * a->Tk; i++)
        m->data[i] = a->mask_kind == MASK_ADD ? 2 * rng_uniform(&r) - 1 : (rng_uniform(&r) < 0.7f);
    if (a->mask_kind == MASK_BOOL) m->data[0] = 1;
    return m;
}

/* q, k, v [B, H, T, D] packed fp32 copies of the case's operands (from the leaves' values) */
static void operands(const acase *a, tensor *const *leaf, float **qkv) {
    const int T[3] = {a->Tq, a->Tk, a->Tk};
    for (int i = 0; i < 3; i++) {
        qkv[i] = xmalloc((size_t)a->B * a->H * T[i] * a->D * sizeof(float));
        for (int b = 0; b < a->B; b++)
            for (int h = 0; h < a->H; h++)
                for (int t = 0; t < T[i]; t++)
                    for (int d = 0; d < a->D; d++) {
                        const int64_t at = (((int64_t)b * a->H + h) * T[i] + t) * a->D + d;
                        qkv[i][at] = a->packed ? leaf[0]->data[((((int64_t)b * a->Tq + t) * 3 + i) * a->H + h) * a->D + d]
                                               : leaf[i]->data[at];
                    }
    }
}

/* The reference: the CPU kernel in bf16 compute on fp32 operands holding the same (bf16) values
 * (bf16 compute rounds q, k, v to bf16, the identity here), o rounded before the backward of
 * L = sum(o * r). Returns o (host, [B, H, Tq, D]); lse and the leaves' gradients into *lse, g
 * (packed: the three parts scattered back into the [B, T, 3, H, D] leaf). */
static float *reference(const acase *a, tensor *const *leaf, int nleaf, tensor *mask, tensor *r, float **lse,
                        float **g) {
    const er_backend *be = backend_get(DEV_CPU);
    const int B = a->B, H = a->H, Tq = a->Tq, Tk = a->Tk, D = a->D, c = GEMM_COMPUTE_BF16;
    const float scale = 1.0f / sqrtf((float)D);
    float *qkv[3], *gr[3];
    operands(a, leaf, qkv);
    const int64_t qs[3] = {(int64_t)H * Tq * D, (int64_t)Tq * D, D}, ks[3] = {(int64_t)H * Tk * D, (int64_t)Tk * D, D};
    const int64_t ms[4] = {0, 0, Tk, 1}; /* a [Tq, Tk] mask broadcast over B, H */
    const int64_t no = (int64_t)B * H * Tq * D, nk = (int64_t)B * H * Tk * D;
    float *o = xmalloc((size_t)no * sizeof(float)), *orounded = xmalloc((size_t)no * sizeof(float));
    float *work = xmalloc(be->attention_workspace(c, B, H, Tq, Tk, D) * sizeof(float));
    *lse = xmalloc((size_t)B * H * Tq * sizeof(float));
    be->attention(c, B, H, Tq, Tk, D, scale, qkv[0], qs, qkv[1], ks, qkv[2], ks, a->mask_kind, mask ? mask->data : NULL, ms,
                  o, qs, *lse, work);
    for (int64_t i = 0; i < no; i++) orounded[i] = rbf(o[i]); /* what the bf16 op keeps for its backward */
    gr[0] = xcalloc((size_t)no, sizeof(float)), gr[1] = xcalloc((size_t)nk, sizeof(float)), gr[2] = xcalloc((size_t)nk, sizeof(float));
    be->attention_backward(c, B, H, Tq, Tk, D, scale, qkv[0], qs, qkv[1], ks, qkv[2], ks, a->mask_kind,
                           mask ? mask->data : NULL, ms, orounded, qs, r->data, qs, *lse, gr[0], qs, gr[1], ks, gr[2], ks, work);
    if (a->packed) { /* leaf [B, T, 3, H, D] */
        g[0] = xmalloc((size_t)3 * no * sizeof(float));
        for (int i = 0; i < 3; i++)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (int t = 0; t < Tq; t++)
                        for (int d = 0; d < D; d++)
                            g[0][((((int64_t)b * Tq + t) * 3 + i) * H + h) * D + d] = gr[i][(((int64_t)b * H + h) * Tq + t) * D + d];
        for (int i = 0; i < 3; i++) free(gr[i]);
    } else {
        for (int i = 0; i < 3; i++) g[i] = gr[i];
    }
    (void)nleaf;
    for (int i = 0; i < 3; i++) free(qkv[i]);
    free(orounded), free(work);
    return o;
}

static void bits_case(const acase *a, uint64_t seed) {
    tensor *leaf[3], *mask = mask_of(a, seed);
    const int nleaf = make_leaves(a, seed, leaf);
    tensor *r = bf16_values(4, SHAPE(a->B, a->H, a->Tq, a->D), seed + 7, -1, 1); /* dL/do, bf16 values */
    float *lse_ref, *gref[3];
    float *oref = reference(a, leaf, nleaf, mask, r, &lse_ref, gref);
    /* the bf16 op */
    tensor *qkv[3];
    qkv_of(a, leaf, 1, qkv);
    tensor *o = op_attention(qkv[0], qkv[1], qkv[2], mask, a->mask_kind, 0);
    cr_assert_not_null(o, "%s", er_msg());
    cr_assert_eq(o->dtype, DT_BF16, "a bf16 attention gives a bf16 o");
    const int64_t no = tensor_numel(o), nl = (int64_t)a->B * a->H * a->Tq;
    uint16_t *ob = xmalloc((size_t)no * 2);
    tensor_to_host_raw(o, ob);
    for (int64_t i = 0; i < no; i++)
        cr_assert_eq(ob[i], er_f32_to_bf16(oref[i]), "D %d mask %d packed %d: o[%lld] 0x%04x, the fp32 op's %.9g rounds to 0x%04x",
                     a->D, a->mask_kind, a->packed, (long long)i, ob[i], oref[i], er_f32_to_bf16(oref[i]));
    const float *lse = ((const attn_ctx *)o->node->ctx)->lse;
    for (int64_t i = 0; i < nl; i++)
        cr_assert(lse[i] == lse_ref[i] || (isnan(lse[i]) && isnan(lse_ref[i])), "D %d: lse[%lld] %.9g, the fp32 op's %.9g",
                  a->D, (long long)i, lse[i], lse_ref[i]);
    cr_assert_eq(backward(op_sum_all(op_mul(op_cast(o, DT_F32), r))), ER_OK, "%s", er_msg());
    /* each leaf element got one term, the bf16 gradient, widened by the casts' backward (exact) */
    for (int i = 0; i < nleaf; i++) {
        float *g = host(leaf[i]->grad);
        for (int64_t j = 0; j < tensor_numel(leaf[i]); j++)
            cr_assert_eq(g[j], rbf(gref[i][j]), "D %d mask %d packed %d: gradient %d [%lld]: %.9g, the fp32 op's %.9g rounded is %.9g",
                         a->D, a->mask_kind, a->packed, i, (long long)j, g[j], gref[i][j], rbf(gref[i][j]));
        free(g);
        free(gref[i]);
        tensor_free(leaf[i]);
    }
    nn_step_end();
    free(ob), free(oref), free(lse_ref);
    tensor_free(r), tensor_free(mask);
}

Test(nn_attention_bf16, vit_packed_qkv_views_bits) {
    bits_case(&(acase){2, 3, 13, 13, 64, 1, MASK_NONE}, 11); /* fused where the CPU has AVX512_BF16 */
    bits_case(&(acase){2, 2, 9, 9, 24, 1, MASK_NONE}, 12);   /* unfused: D not a multiple of 16 */
    bits_case(&(acase){1, 2, 10, 10, 64, 1, MASK_ADD}, 13);  /* masked: unfused */
}

Test(nn_attention_bf16, separate_tensors_tq_ne_tk_bits) {
    bits_case(&(acase){2, 2, 7, 11, 64, 0, MASK_NONE}, 21);
    bits_case(&(acase){1, 3, 9, 5, 24, 0, MASK_ADD}, 22);
    bits_case(&(acase){2, 1, 6, 8, 16, 0, MASK_BOOL}, 23);
}

/* q (bf16, not a leaf) feeds two attentions: the tape runs the newer one's backward first, into a
 * fresh bf16 buffer (round(g2)), then the older one's adds once: round(round(g2) + g1), not
 * round(round(g2) + round(g1)). g1, g2: the fp32 op's q gradients of each attention alone. */
Test(nn_attention_bf16, gradient_accumulates_round_old_plus_new) {
    const acase a = {2, 2, 6, 9, 24, 0, MASK_NONE};
    tensor *leaf[3], *k2 = bf16_values(4, SHAPE(2, 2, 9, 24), 38, -2, 2), *v2 = bf16_values(4, SHAPE(2, 2, 9, 24), 39, -2, 2);
    make_leaves(&a, 31, leaf);
    tensor *r1 = bf16_values(4, SHAPE(2, 2, 6, 24), 40, -1, 1), *r2 = bf16_values(4, SHAPE(2, 2, 6, 24), 41, -1, 1);
    float *lse, *g1[3], *g2[3], *o1 = reference(&a, leaf, 3, NULL, r1, &lse, g1);
    free(lse);
    tensor *leaf2[3] = {leaf[0], k2, v2};
    float *o2 = reference(&a, leaf2, 3, NULL, r2, &lse, g2);
    free(lse);
    tensor *q = op_cast(leaf[0], DT_BF16);
    tensor *oa = op_attention(q, op_cast(leaf[1], DT_BF16), op_cast(leaf[2], DT_BF16), NULL, MASK_NONE, 0);
    tensor *ob = op_attention(q, op_cast(k2, DT_BF16), op_cast(v2, DT_BF16), NULL, MASK_NONE, 0);
    cr_assert(oa && ob, "%s", er_msg());
    tensor *L = op_add(op_sum_all(op_mul(op_cast(oa, DT_F32), r1)), op_sum_all(op_mul(op_cast(ob, DT_F32), r2)));
    cr_assert_eq(backward(L), ER_OK, "%s", er_msg());
    cr_assert_eq(q->grad->dtype, DT_BF16);
    float *gq = host(leaf[0]->grad);
    int64_t twice = 0; /* elements where rounding each term first would differ: the test can tell */
    for (int64_t i = 0; i < tensor_numel(leaf[0]); i++) {
        float want = rbf(rbf(g2[0][i]) + g1[0][i]);
        twice += rbf(rbf(g2[0][i]) + rbf(g1[0][i])) != want;
        cr_assert_eq(gq[i], want, "dL/dq[%lld] %.9g, round(round(%.9g) + %.9g) = %.9g", (long long)i, gq[i], g2[0][i],
                     g1[0][i], want);
    }
    cr_assert_gt(twice, 0, "no element tells round(old + new) from round(old + round(new)): pick other values");
    for (int i = 1; i < 3; i++) { /* k, v and k2, v2: one term each */
        float *gk = host(leaf[i]->grad), *gk2 = host(leaf2[i]->grad);
        for (int64_t j = 0; j < tensor_numel(leaf[i]); j++) {
            cr_assert_eq(gk[j], rbf(g1[i][j]), "input %d [%lld]", i, (long long)j);
            cr_assert_eq(gk2[j], rbf(g2[i][j]), "second attention's input %d [%lld]", i, (long long)j);
        }
        free(gk), free(gk2);
    }
    for (int i = 0; i < 3; i++) free(g1[i]), free(g2[i]);
    free(gq), free(o1), free(o2);
    nn_step_end();
    for (int i = 0; i < 3; i++) tensor_free(leaf[i]);
    tensor_free(k2), tensor_free(v2), tensor_free(r1), tensor_free(r2);
}

/* q given as the key too: one gradient buffer, its two fp32 parts summed before the one rounding.
 * The reference is the kernel's two parts added here, where the op's kernel adds both into one
 * buffer in its own order, so the check is one bf16 step, not bits. */
Test(nn_attention_bf16, same_tensor_as_query_and_key) {
    const acase a = {1, 2, 8, 8, 24, 0, MASK_NONE};
    tensor *leaf[3];
    make_leaves(&a, 51, leaf);
    tensor *r = bf16_values(4, SHAPE(1, 2, 8, 24), 52, -1, 1);
    /* the reference: q as query and as key through the kernel (two gradient parts, added here) */
    tensor *same[3] = {leaf[0], leaf[0], leaf[2]};
    float *lse, *gp[3], *oh = reference(&a, same, 3, NULL, r, &lse, gp);
    const int64_t nq = tensor_numel(leaf[0]);
    float *gref = xmalloc((size_t)nq * sizeof(float));
    for (int64_t i = 0; i < nq; i++) gref[i] = gp[0][i] + gp[1][i];
    for (int i = 0; i < 3; i++) free(gp[i]);
    free(lse);
    tensor *q = op_cast(leaf[0], DT_BF16);
    tensor *ob = op_attention(q, q, op_cast(leaf[2], DT_BF16), NULL, MASK_NONE, 0);
    cr_assert_eq(backward(op_sum_all(op_mul(op_cast(ob, DT_F32), r))), ER_OK, "%s", er_msg());
    float *g = host(leaf[0]->grad);
    for (int64_t i = 0; i < tensor_numel(leaf[0]); i++)
        cr_assert(fabsf(g[i] - gref[i]) <= fabsf(gref[i]) / 128 + 1e-6f, "dL/dq[%lld] %.9g vs the fp32 op's %.9g",
                  (long long)i, g[i], gref[i]);
    free(oh), free(gref), free(g);
    nn_step_end();
    for (int i = 0; i < 3; i++) tensor_free(leaf[i]);
    tensor_free(r);
}

Test(nn_attention_bf16, dtype_mix_refused_naming_the_op) {
    tensor *x = gc_rand(4, SHAPE(1, 2, 4, 8), 61, -1, 1), *m = gc_rand(2, SHAPE(4, 4), 62, -1, 1);
    tensor *b = op_cast(x, DT_BF16);
    const struct { tensor *q, *k, *v; } mix[3] = {{b, x, b}, {x, b, x}, {b, b, x}};
    for (int i = 0; i < 3; i++) {
        cr_expect_null(op_attention(mix[i].q, mix[i].k, mix[i].v, NULL, MASK_NONE, 0), "mix %d was accepted", i);
        cr_expect(strstr(er_msg(), "attention") && strstr(er_msg(), "one dtype"), "mix %d: %s", i, er_msg());
    }
    cr_expect_null(op_attention(b, b, b, op_cast(m, DT_BF16), MASK_ADD, 0), "a bf16 mask was accepted");
    cr_expect(strstr(er_msg(), "attention") && strstr(er_msg(), "fp32"), "%s", er_msg());
    cr_expect_not_null(op_attention(b, b, b, m, MASK_ADD, 0), "bf16 q, k, v with an fp32 mask: %s", er_msg());
    cr_expect_not_null(op_attention(x, x, x, m, MASK_ADD, 0), "fp32: %s", er_msg());
    nn_step_end();
    tensor_free(x), tensor_free(m);
}

/* A ViT block's packed qkv gradient is written by the attention kernel, not zero-filled first
 * (ops_attention_bf16.c: the three views cover the fresh buffer). The backward of
 * sum(cast(attention(views of cast(qkv)))) issues 3 fills: 4 with the qkv buffer zero-filled
 * (seen with the write switched off), the others being the seed gradient, the casts' buffers and
 * the leaf's gradient. With q, k, v as three separate leaves it issues 8: their three gradient
 * buffers, which no one kernel covers, and two more leaves'. Where the CPU has no direct bf16 kernel
 * (no AVX512_BF16) the op widens and fills: skipped. */
static int64_t backward_fills(const acase *a, uint64_t seed) {
    tensor *leaf[3], *qkv[3];
    const int nleaf = make_leaves(a, seed, leaf);
    qkv_of(a, leaf, 1, qkv);
    tensor *o = op_attention(qkv[0], qkv[1], qkv[2], NULL, MASK_NONE, 0);
    cr_assert_not_null(o, "%s", er_msg());
    tensor *L = op_sum_all(op_cast(o, DT_F32));
    prof_start();
    cr_assert_eq(backward(L), ER_OK, "%s", er_msg());
    prof_stop();
    prof_entry e[64];
    const int n = prof_entries(e, 64);
    int64_t fills = 0;
    for (int i = 0; i < n; i++)
        if (e[i].phase == PROF_BACKWARD && !strcmp(e[i].name, "fill")) fills += e[i].calls;
    nn_step_end();
    for (int i = 0; i < nleaf; i++) tensor_free(leaf[i]);
    return fills;
}
/* whether the CPU table has its direct bf16 kernel for a [1, 1, 13, 64] head (AVX512_BF16 kernels) */
static int cpu_direct_bf16(void) {
    const er_backend *cpu = backend_get(DEV_CPU);
    const int64_t s[3] = {13 * 64, 13 * 64, 64};
    uint16_t *x = calloc(13 * 64, 2), *o = calloc(13 * 64, 2);
    float *lse = calloc(13, 4), *work = calloc(cpu->attention_workspace(GEMM_COMPUTE_BF16, 1, 1, 13, 13, 64) + 1, 4);
    const int r = cpu->attention_bf16(1, 1, 13, 13, 64, 0.125f, x, s, x, s, x, s, o, s, lse, work);
    free(x), free(o), free(lse), free(work);
    return r;
}
Test(nn_attention_bf16, packed_qkv_gradient_written_without_zero_fill) {
    if (!cpu_direct_bf16()) cr_skip_test("no direct bf16 attention kernel on this CPU (no AVX512_BF16): the op widens and fills");
    const int64_t packed = backward_fills(&(acase){2, 3, 13, 13, 64, 1, MASK_NONE}, 61);
    const int64_t separate = backward_fills(&(acase){2, 3, 13, 13, 64, 0, MASK_NONE}, 62);
    cr_expect_eq(packed, 3, "packed qkv: %lld fills in the backward, want 3 (none for the qkv gradient)", (long long)packed);
    cr_expect_eq(separate, 8, "separate q, k, v: %lld fills, want 8", (long long)separate);
}
