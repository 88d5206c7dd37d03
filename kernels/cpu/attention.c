/* attention.c — memory-efficient scaled dot-product attention on the CPU.
 * One (batch, head) score block [Tq, Tk] exists at a time per thread (in `work`); the backward
 * pass recomputes it from q, k and the saved row log-sum-exp instead of storing probabilities.
 * Heads run in parallel when there are at least as many heads as threads; otherwise heads run in
 * turn and each matrix product uses all threads. Unmasked heads of the usual widths go to the
 * fused kernels (attention_avx512.c, attention_bf16.c); this file's loops are the unfused path:
 * masked heads, other widths, CPUs without AVX-512, and the reference the fused ones are tested
 * against. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/gemm.h"

/* Each thread's part of `work`, in floats: for the unfused path the scores S and dS [Tq x Tk]
 * each, the row terms Di [Tq], then K^T or V^T packed for the AVX-512 head product
 * [D x round16(Tk)]; the fused kernels' layouts when larger. */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }
static size_t pack_offset(int Tq, int Tk) { return round16(2 * (size_t)Tq * Tk + (size_t)Tq); }
static size_t per_thread(int Tq, int Tk, int D) {
    size_t n = pack_offset(Tq, Tk) + (size_t)D * round16((size_t)Tk);
    size_t f = attn_fused_forward_floats(Tq, Tk, D), b = attn_fused_backward_floats(Tq, Tk, D);
    size_t f16 = attn_bf16_forward_floats(Tq, Tk, D), b16 = attn_bf16_backward_floats(Tq, Tk, D);
    f = f > b ? f : b;
    f = f > f16 ? f : f16;
    f = f > b16 ? f : b16;
    return round16(n > f ? n : f);
}

size_t cpu_attention_workspace(int compute, int B, int H, int Tq, int Tk, int D) {
    (void)compute; /* one layout serves every path */
    return (size_t)omp_get_max_threads() * per_thread(Tq, Tk, D);
}

/* The AVX-512 per-head products (simd_avx512.c) serve head widths D % 16 == 0, D <= 64 (every
 * ViT config here has D = 64) in fp32 mode: no packing of A, no edge-tile overhead (measured
 * 5-12 % faster than sgemm on 197 x 197 x 64, bench/RESULTS_core.md). sgemm is the reference,
 * the path for other widths, and the path in bf16 so attention follows the precision it is given. */
static int fast_head(int prec, int D) {
    return D > 0 && D % 16 == 0 && D <= 64 && prec == SGEMM_FP32 && cpu_simd();
}

/* Heads run in parallel when there are at least as many as threads and enough work; otherwise in
 * turn, each product using all threads. */
static int heads_in_parallel(int nh, int nt, int Tq, int Tk, int D) {
    return nh >= nt && nt > 1 && (double)nh * Tq * Tk * D > 4.0 * CPU_PAR_MIN;
}

/* Unmasked heads of a width D % 16 == 0, D <= 64 run the fused kernels: attention_avx512.c in fp32
 * mode, attention_bf16.c in bf16 on an AVX512_BF16 CPU. Masked ones (and every head when
 * ENDORET_NO_SIMD / ENDORET_NO_AVX512 is set) this file's unfused path, the reference the fused
 * kernels are tested against. Returns 0 (unfused), 1 (fp32) or 2 (bf16). */
static int fused(int prec, int D, int Tk, int mask_kind, const int64_t *ks, const int64_t *vs) {
    if (mask_kind != MASK_NONE || !cpu_simd() || D <= 0 || D % 16 || D > 64) return 0;
    if (prec == SGEMM_BF16) return cpu_has_avx512_bf16() ? 2 : 0;
    /* the fp32 kernels' packing gathers take 32-bit offsets */
    return (int64_t)Tk * ks[2] < INT32_MAX && (int64_t)Tk * vs[2] < INT32_MAX ? 1 : 0;
}

/* Head bh's rows, for the fused kernels and their prefetch of the next head. */
static attn_next head_rows(int bh, int H, int Tq, int Tk, const float *q, const int64_t *qs,
                           const float *k, const int64_t *ks, const float *v, const int64_t *vs,
                           const float *o, const int64_t *os, const float *go, const int64_t *gos,
                           const float *gq, const int64_t *gqs, const float *gk, const int64_t *gks,
                           const float *gv, const int64_t *gvs) {
    int64_t b = bh / H, h = bh % H;
    attn_next r = {q + b * qs[0] + h * qs[1], k + b * ks[0] + h * ks[1], v + b * vs[0] + h * vs[1],
                   o + b * os[0] + h * os[1], go ? go + b * gos[0] + h * gos[1] : NULL,
                   gq ? gq + b * gqs[0] + h * gqs[1] : NULL, gk ? gk + b * gks[0] + h * gks[1] : NULL,
                   gv ? gv + b * gvs[0] + h * gvs[1] : NULL, qs[2], ks[2], vs[2], os[2],
                   go ? gos[2] : 0, gq ? gqs[2] : 0, gk ? gks[2] : 0, gv ? gvs[2] : 0, Tq, Tk};
    return r;
}

/* The next head for the calling thread: heads go to whichever thread asks first. */
static int claim_head(int *counter) {
    int h;
    #pragma omp atomic capture
    h = (*counter)++;
    return h;
}

/* The fused kernels (bf16: attention_bf16.c) over all B H heads, in parallel when `par`: each
 * thread claims its next head (a shared counter) before running the current one, which then
 * prefetches the next one's rows. Which thread runs a head does not change its result. */
static void fused_all(int backward, int bf16, int par, int B, int H, int Tq, int Tk, int D, float scale,
                      const float *q, const int64_t *qs, const float *k, const int64_t *ks,
                      const float *v, const int64_t *vs, float *o, const int64_t *os,
                      const float *go, const int64_t *gos, float *lse, float *gq, const int64_t *gqs,
                      float *gk, const int64_t *gks, float *gv, const int64_t *gvs, float *work) {
    int nh = B * H, counter = 0;
    size_t per = per_thread(Tq, Tk, D);
    #pragma omp parallel if (par)
    {
        float *w = work + per * omp_get_thread_num();
        for (int cur = claim_head(&counter), nxt; cur < nh; cur = nxt) {
            nxt = claim_head(&counter);
            attn_next c = head_rows(cur, H, Tq, Tk, q, qs, k, ks, v, vs, o, os, go, gos, gq, gqs, gk, gks, gv, gvs);
            attn_next n = c;
            if (nxt < nh) n = head_rows(nxt, H, Tq, Tk, q, qs, k, ks, v, vs, o, os, go, gos, gq, gqs, gk, gks, gv, gvs);
            const attn_next *pn = nxt < nh ? &n : NULL;
            float *l = lse + (int64_t)cur * Tq, *oc = o + (c.o - o);
            float *gqc = gq ? gq + (c.gq - gq) : NULL, *gkc = gk ? gk + (c.gk - gk) : NULL, *gvc = gv ? gv + (c.gv - gv) : NULL;
            if (!backward)
                (bf16 ? attn_bf16_forward : attn_fused_forward_avx512)(Tq, Tk, D, scale, c.q, c.ldq, c.k, c.ldk, c.v,
                                                                       c.ldv, oc, c.ldo, l, w, pn);
            else
                (bf16 ? attn_bf16_backward : attn_fused_backward_avx512)(Tq, Tk, D, scale, c.q, c.ldq, c.k, c.ldk, c.v,
                                                                         c.ldv, c.o, c.ldo, c.go, c.ldgo, l, gqc, c.ldgq,
                                                                         gkc, c.ldgk, gvc, c.ldgv, w, pn);
        }
    }
}

/* B^T of a [N x D] row-major block (row stride ldb), packed into t [D][ld], ld = N rounded up
 * to 16, zero-padded: the "A B^T" kernel's B operand. Returns ld. */
static int64_t pack_transposed(int N, int D, const float *B, int64_t ldb, float *t) {
    int64_t l = (N + 15) / 16 * 16;
    if (cpu_simd() && (int64_t)N * ldb < INT32_MAX) { /* gather offsets are 32-bit */
        pack_transposed_avx512(N, D, B, ldb, t, l);
        return l;
    }
    for (int j = 0; j < N; j++)
        for (int d = 0; d < D; d++) t[d * l + j] = B[j * ldb + d];
    for (int d = 0; d < D; d++)
        for (int64_t j = N; j < l; j++) t[d * l + j] = 0.0f;
    return l;
}

/* C [M x N] (+)= alpha A B^T for one head: A, B rows of length D; pack holds D x round16(N). */
static void head_abt(int prec, int M, int N, int D, float alpha, const float *A, int64_t lda, const float *B,
                     int64_t ldb, float *C, int64_t ldc, int acc, float *pack) {
    if (fast_head(prec, D)) {
        int64_t ldt = pack_transposed(N, D, B, ldb, pack);
        attn_gemm_abt_avx512(M, N, D, alpha, A, lda, pack, ldt, C, ldc, acc);
    } else {
        sgemm(prec, 0, 1, M, N, D, alpha, A, (int)lda, B, (int)ldb, acc ? 1.0f : 0.0f, C, (int)ldc);
    }
}

/* C [M x D] (+)= alpha op(A) B for one head: op(A) = A [M x K] (row stride lda) or, transA, the
 * transpose of a [K x M] A; B [K x D] rows of stride ldb. */
static void head_ab(int prec, int transA, int M, int D, int K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
    if (fast_head(prec, D))
        attn_gemm_ab_avx512(M, D, K, alpha, A, transA ? 1 : lda, transA ? lda : 1, B, ldb, C, ldc, acc);
    else
        sgemm(prec, transA, 0, M, D, K, alpha, A, (int)lda, B, (int)ldb, acc ? 1.0f : 0.0f, C, (int)ldc);
}

/* S = scale * Q K^T (+ mask) for head (b, h). */
static void scores(int prec, int b, int h, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                   const float *k, const int64_t *ks, int mask_kind, const float *mask,
                   const int64_t *ms, float *S, float *pack) {
    head_abt(prec, Tq, Tk, D, scale, q + b * qs[0] + h * qs[1], qs[2], k + b * ks[0] + h * ks[1], ks[2], S, Tk, 0,
             pack);
    if (mask_kind == MASK_NONE) return;
    const float *mb = mask + b * ms[0] + h * ms[1];
    for (int i = 0; i < Tq; i++) {
        const float *mr = mb + i * ms[2];
        float *sr = S + (int64_t)i * Tk;
        if (mask_kind == MASK_ADD) {
            for (int j = 0; j < Tk; j++) sr[j] += mr[j * ms[3]];
        } else {
            for (int j = 0; j < Tk; j++)
                if (mr[j * ms[3]] == 0.0f) sr[j] = -INFINITY;
        }
    }
}

/* In-place softmax of one score row; returns its log-sum-exp (+inf for a fully masked row, whose
 * output is 0 and which gets no gradient). Reference for softmax_row_avx512. */
static float softmax_row_ref(float *sr, int Tk) {
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int j = 0; j < Tk; j++) m = sr[j] > m ? sr[j] : m;
    if (m == -INFINITY) {
        for (int j = 0; j < Tk; j++) sr[j] = 0.0f;
        return INFINITY;
    }
    #pragma omp simd
    for (int j = 0; j < Tk; j++) sr[j] = exp_vec(sr[j] - m);
    double s = 0;
    #pragma omp simd reduction(+ : s)
    for (int j = 0; j < Tk; j++) s += sr[j];
    float inv = (float)(1.0 / s);
    #pragma omp simd
    for (int j = 0; j < Tk; j++) sr[j] *= inv;
    return m + (float)log(s);
}

static void head_forward(int prec, int b, int h, int Tq, int Tk, int D, float scale, const float *q,
                         const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                         const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                         float *o, const int64_t *os, float *lse, float *S, int H) {
    scores(prec, b, h, Tq, Tk, D, scale, q, qs, k, ks, mask_kind, mask, ms, S, S + pack_offset(Tq, Tk));
    float *lrow = lse + ((int64_t)b * H + h) * Tq;
    if (cpu_simd()) {
        for (int i = 0; i < Tq; i++) lrow[i] = softmax_row_avx512(S + (int64_t)i * Tk, Tk);
    } else {
        for (int i = 0; i < Tq; i++) lrow[i] = softmax_row_ref(S + (int64_t)i * Tk, Tk);
    }
    head_ab(prec, 0, Tq, D, Tk, 1.0f, S, Tk, v + b * vs[0] + h * vs[1], vs[2], o + b * os[0] + h * os[1], os[2], 0);
}

void cpu_attention(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                   const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                   const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms, float *o,
                   const int64_t *os, float *lse, float *work) {
    int nh = B * H, nt = omp_get_max_threads();
    size_t per = per_thread(Tq, Tk, D);
    int par = heads_in_parallel(nh, nt, Tq, Tk, D);
    const int prec = sgemm_precision_of(compute);
    int f = fused(prec, D, Tk, mask_kind, ks, vs);
    if (f) {
        fused_all(0, f == 2, par, B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, NULL, NULL, lse, NULL, NULL,
                  NULL, NULL, NULL, NULL, work);
    } else if (par) {
        #pragma omp parallel for schedule(dynamic)
        for (int bh = 0; bh < nh; bh++)
            head_forward(prec, bh / H, bh % H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask, ms,
                         o, os, lse, work + per * omp_get_thread_num(), H);
    } else {
        for (int bh = 0; bh < nh; bh++)
            head_forward(prec, bh / H, bh % H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask, ms,
                         o, os, lse, work, H);
    }
}

static void head_backward(int prec, int b, int h, int H, int Tq, int Tk, int D, float scale, const float *q,
                          const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                          const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                          const float *o, const int64_t *os, const float *go, const int64_t *gos,
                          const float *lse, float *gq, const int64_t *gqs, float *gk,
                          const int64_t *gks, float *gv, const int64_t *gvs, float *w) {
    float *P = w, *dP = w + (size_t)Tq * Tk, *Di = dP + (size_t)Tq * Tk, *pack = w + pack_offset(Tq, Tk);
    scores(prec, b, h, Tq, Tk, D, scale, q, qs, k, ks, mask_kind, mask, ms, P, pack);
    const float *lrow = lse + ((int64_t)b * H + h) * Tq;
    const float *ob = o + b * os[0] + h * os[1], *gob = go + b * gos[0] + h * gos[1];
    for (int i = 0; i < Tq; i++) {
        float *pr = P + (int64_t)i * Tk;
        float l = lrow[i];
        #pragma omp simd
        for (int j = 0; j < Tk; j++) pr[j] = exp_vec(pr[j] - l); /* exp(-inf) = 0 for masked */
        const float *gr = gob + i * gos[2], *orow = ob + i * os[2];
        float s = 0; /* D terms: float lanes are plenty, and a fixed order per row */
        #pragma omp simd reduction(+ : s)
        for (int d = 0; d < D; d++) s += gr[d] * orow[d];
        Di[i] = s;
    }
    const float *vb = v + b * vs[0] + h * vs[1];
    if (gv) /* dV += P^T dO */
        head_ab(prec, 1, Tk, D, Tq, 1.0f, P, Tk, gob, gos[2], gv + b * gvs[0] + h * gvs[1], gvs[2], 1);
    head_abt(prec, Tq, Tk, D, 1.0f, gob, gos[2], vb, vs[2], dP, Tk, 0, pack); /* dP = dO V^T */
    for (int i = 0; i < Tq; i++) {
        float *pr = P + (int64_t)i * Tk, *dr = dP + (int64_t)i * Tk;
        const float di = Di[i];
        #pragma omp simd
        for (int j = 0; j < Tk; j++) dr[j] = pr[j] * (dr[j] - di); /* dS */
    }
    if (gq) /* dQ += scale dS K */
        head_ab(prec, 0, Tq, D, Tk, scale, dP, Tk, k + b * ks[0] + h * ks[1], ks[2], gq + b * gqs[0] + h * gqs[1], gqs[2], 1);
    if (gk) /* dK += scale dS^T Q */
        head_ab(prec, 1, Tk, D, Tq, scale, dP, Tk, q + b * qs[0] + h * qs[1], qs[2], gk + b * gks[0] + h * gks[1], gks[2], 1);
}

void cpu_attention_backward(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                            const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                            const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                            const float *o, const int64_t *os, const float *go, const int64_t *gos,
                            const float *lse, float *gq, const int64_t *gqs, float *gk,
                            const int64_t *gks, float *gv, const int64_t *gvs, float *work) {
    int nh = B * H, nt = omp_get_max_threads();
    size_t per = per_thread(Tq, Tk, D);
    int par = heads_in_parallel(nh, nt, Tq, Tk, D);
    const int prec = sgemm_precision_of(compute);
    int f = fused(prec, D, Tk, mask_kind, ks, vs);
    if (f) {
        fused_all(1, f == 2, par, B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, (float *)o, os, go, gos, (float *)lse, gq, gqs,
                  gk, gks, gv, gvs, work);
    } else if (par) {
        #pragma omp parallel for schedule(dynamic)
        for (int bh = 0; bh < nh; bh++)
            head_backward(prec, bh / H, bh % H, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask,
                          ms, o, os, go, gos, lse, gq, gqs, gk, gks, gv, gvs,
                          work + per * omp_get_thread_num());
    } else {
        for (int bh = 0; bh < nh; bh++)
            head_backward(prec, bh / H, bh % H, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask,
                          ms, o, os, go, gos, lse, gq, gqs, gk, gks, gv, gvs, work);
    }
}

/* Attention on bf16 storage (ops.def attention_bf16): the fused bf16 kernels on the bf16 tensors
 * themselves (attention_bf16.c's _stored forms), wherever cpu_attention in bf16 compute would run them
 * (unmasked, D % 16 == 0 up to 64, an AVX512_BF16 CPU); elsewhere 0, and the op layer widens for the
 * unfused path. Heads are split over threads as cpu_attention splits them; a head's result does not
 * depend on the thread that runs it. */
static int stored_ok(int D, int Tk, const int64_t *ks, const int64_t *vs) {
    return fused(SGEMM_BF16, D, Tk, MASK_NONE, ks, vs) == 2; /* where cpu_attention would run the bf16 kernels */
}

/* bf16 rows seen in attn_next's fp32 units, for the prefetch only: a row of ld bf16 starts ld / 2 floats
 * on (ld even), and prefetching D floats covers its D bf16 and as many after */
static const float *as_f32(const uint16_t *p) { return (const float *)(const void *)p; }

/* fused_all's scheme on bf16 storage: threads claim heads from a shared counter and prefetch the next
 * one's rows while running the current one; a head's result does not depend on its thread */
static void stored_all(int backward, int par, int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q,
                       const int64_t *qs, const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs,
                       uint16_t *o, const int64_t *os, const uint16_t *go, const int64_t *gos, float *lse, uint16_t *gq,
                       const int64_t *gqs, uint16_t *gk, const int64_t *gks, uint16_t *gv, const int64_t *gvs, float *work) {
    const int nh = B * H;
    const size_t per = per_thread(Tq, Tk, D);
    int even = qs[2] % 2 == 0 && ks[2] % 2 == 0 && vs[2] % 2 == 0 && os[2] % 2 == 0;
    if (backward) even = even && gos[2] % 2 == 0 && (!gq || gqs[2] % 2 == 0) && (!gk || gks[2] % 2 == 0) && (!gv || gvs[2] % 2 == 0);
    int counter = 0;
    #pragma omp parallel if (par)
    {
        float *w = work + per * omp_get_thread_num();
        for (int cur = claim_head(&counter), nxt; cur < nh; cur = nxt) {
            nxt = claim_head(&counter);
            const int64_t b = cur / H, h = cur % H, nb = nxt / H, nhh = nxt % H;
#define AT(p, st, bb, hh) ((p) ? (p) + (bb) * (st)[0] + (hh) * (st)[1] : NULL)
            attn_next n = {0};
            if (nxt < nh && even)
                n = (attn_next){as_f32(AT(q, qs, nb, nhh)), as_f32(AT(k, ks, nb, nhh)), as_f32(AT(v, vs, nb, nhh)),
                                as_f32(AT(o, os, nb, nhh)), backward ? as_f32(AT(go, gos, nb, nhh)) : NULL,
                                backward ? as_f32(AT(gq, gqs, nb, nhh)) : NULL, backward ? as_f32(AT(gk, gks, nb, nhh)) : NULL,
                                backward ? as_f32(AT(gv, gvs, nb, nhh)) : NULL, qs[2] / 2, ks[2] / 2, vs[2] / 2, os[2] / 2,
                                backward ? gos[2] / 2 : 0, gq ? gqs[2] / 2 : 0, gk ? gks[2] / 2 : 0, gv ? gvs[2] / 2 : 0, Tq, Tk};
            const attn_next *pn = nxt < nh && even ? &n : NULL;
            if (!backward)
                attn_bf16_forward_stored(Tq, Tk, D, scale, AT(q, qs, b, h), qs[2], AT(k, ks, b, h), ks[2], AT(v, vs, b, h), vs[2],
                                         AT(o, os, b, h), os[2], lse + (int64_t)cur * Tq, w, pn);
            else
                attn_bf16_backward_stored(Tq, Tk, D, scale, AT(q, qs, b, h), qs[2], AT(k, ks, b, h), ks[2], AT(v, vs, b, h),
                                          vs[2], AT(o, os, b, h), os[2], AT(go, gos, b, h), gos[2], lse + (int64_t)cur * Tq,
                                          AT(gq, gqs, b, h), gq ? gqs[2] : 0, AT(gk, gks, b, h), gk ? gks[2] : 0,
                                          AT(gv, gvs, b, h), gv ? gvs[2] : 0, w, pn);
#undef AT
        }
    }
}

int cpu_attention_bf16(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                       const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs, uint16_t *o,
                       const int64_t *os, float *lse, float *work) {
    if (!stored_ok(D, Tk, ks, vs) || B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0) return 0;
    const int par = heads_in_parallel(B * H, omp_get_max_threads(), Tq, Tk, D);
    stored_all(0, par, B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, NULL, NULL, lse, NULL, NULL, NULL, NULL, NULL,
               NULL, work);
    return 1;
}

/* A [B, H, T, D] bf16 view with (b, h, t) strides s and unit d stride set to +0. */
static void zero_bf16_view(uint16_t *g, const int64_t *s, int B, int H, int T, int D) {
    if (!g) return;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) memset(g + b * s[0] + h * s[1] + t * s[2], 0, (size_t)D * sizeof *g);
}

int cpu_attention_bf16_backward(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                                const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs,
                                const uint16_t *o, const int64_t *os, const uint16_t *go, const int64_t *gos,
                                const float *lse, uint16_t *gq, const int64_t *gqs, uint16_t *gk, const int64_t *gks,
                                uint16_t *gv, const int64_t *gvs, int accumulate, float *work) {
    if (!stored_ok(D, Tk, ks, vs) || B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0) return 0;
    if (!accumulate) { /* the kernels add: written = added into zeros */
        zero_bf16_view(gq, gqs, B, H, Tq, D);
        zero_bf16_view(gk, gks, B, H, Tk, D);
        zero_bf16_view(gv, gvs, B, H, Tk, D);
    }
    const int par = heads_in_parallel(B * H, omp_get_max_threads(), Tq, Tk, D);
    stored_all(1, par, B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, (uint16_t *)o, os, go, gos, (float *)lse, gq, gqs, gk,
               gks, gv, gvs, work);
    return 1;
}
