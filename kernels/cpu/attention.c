/* attention.c — memory-efficient scaled dot-product attention on the CPU.
 * One (batch, head) score block [Tq, Tk] exists at a time per thread (in `work`); the backward
 * pass recomputes it from q, k and the saved row log-sum-exp instead of storing probabilities.
 * Heads run in parallel when there are at least as many heads as threads; otherwise heads run in
 * turn and each matrix product uses all threads. */
#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm.h"

size_t cpu_attention_workspace(int B, int H, int Tq, int Tk, int D) {
    return (size_t)omp_get_max_threads() * (2 * (size_t)Tq * Tk + (size_t)Tq);
}

/* S = scale * Q K^T (+ mask) for head (b, h). */
static void scores(int b, int h, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                   const float *k, const int64_t *ks, int mask_kind, const float *mask,
                   const int64_t *ms, float *S) {
    sgemm(0, 1, Tq, Tk, D, scale, q + b * qs[0] + h * qs[1], (int)qs[2], k + b * ks[0] + h * ks[1],
          (int)ks[2], 0.0f, S, Tk);
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

static void head_forward(int b, int h, int Tq, int Tk, int D, float scale, const float *q,
                         const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                         const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                         float *o, const int64_t *os, float *lse, float *S, int H) {
    scores(b, h, Tq, Tk, D, scale, q, qs, k, ks, mask_kind, mask, ms, S);
    float *lrow = lse + ((int64_t)b * H + h) * Tq;
    if (cpu_simd()) {
        for (int i = 0; i < Tq; i++) lrow[i] = softmax_row_avx512(S + (int64_t)i * Tk, Tk);
    } else {
        for (int i = 0; i < Tq; i++) lrow[i] = softmax_row_ref(S + (int64_t)i * Tk, Tk);
    }
    sgemm(0, 0, Tq, D, Tk, 1.0f, S, Tk, v + b * vs[0] + h * vs[1], (int)vs[2], 0.0f,
          o + b * os[0] + h * os[1], (int)os[2]);
}

void cpu_attention(int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                   const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                   const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms, float *o,
                   const int64_t *os, float *lse, float *work) {
    int nh = B * H, nt = omp_get_max_threads();
    size_t per = 2 * (size_t)Tq * Tk + (size_t)Tq;
    if (nh >= nt && nt > 1 && (double)nh * Tq * Tk * D > 4.0 * CPU_PAR_MIN) {
        #pragma omp parallel for schedule(dynamic)
        for (int bh = 0; bh < nh; bh++)
            head_forward(bh / H, bh % H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask, ms,
                         o, os, lse, work + per * omp_get_thread_num(), H);
    } else {
        for (int bh = 0; bh < nh; bh++)
            head_forward(bh / H, bh % H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask, ms,
                         o, os, lse, work, H);
    }
}

static void head_backward(int b, int h, int H, int Tq, int Tk, int D, float scale, const float *q,
                          const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                          const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                          const float *o, const int64_t *os, const float *go, const int64_t *gos,
                          const float *lse, float *gq, const int64_t *gqs, float *gk,
                          const int64_t *gks, float *gv, const int64_t *gvs, float *w) {
    float *P = w, *dP = w + (size_t)Tq * Tk, *Di = dP + (size_t)Tq * Tk;
    scores(b, h, Tq, Tk, D, scale, q, qs, k, ks, mask_kind, mask, ms, P);
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
        sgemm(1, 0, Tk, D, Tq, 1.0f, P, Tk, gob, (int)gos[2], 1.0f, gv + b * gvs[0] + h * gvs[1],
              (int)gvs[2]);
    sgemm(0, 1, Tq, Tk, D, 1.0f, gob, (int)gos[2], vb, (int)vs[2], 0.0f, dP, Tk); /* dP = dO V^T */
    for (int i = 0; i < Tq; i++) {
        float *pr = P + (int64_t)i * Tk, *dr = dP + (int64_t)i * Tk;
        const float di = Di[i];
        #pragma omp simd
        for (int j = 0; j < Tk; j++) dr[j] = pr[j] * (dr[j] - di); /* dS */
    }
    if (gq)
        sgemm(0, 0, Tq, D, Tk, scale, dP, Tk, k + b * ks[0] + h * ks[1], (int)ks[2], 1.0f,
              gq + b * gqs[0] + h * gqs[1], (int)gqs[2]);
    if (gk)
        sgemm(1, 0, Tk, D, Tq, scale, dP, Tk, q + b * qs[0] + h * qs[1], (int)qs[2], 1.0f,
              gk + b * gks[0] + h * gks[1], (int)gks[2]);
}

void cpu_attention_backward(int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                            const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                            const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                            const float *o, const int64_t *os, const float *go, const int64_t *gos,
                            const float *lse, float *gq, const int64_t *gqs, float *gk,
                            const int64_t *gks, float *gv, const int64_t *gvs, float *work) {
    int nh = B * H, nt = omp_get_max_threads();
    size_t per = 2 * (size_t)Tq * Tk + (size_t)Tq;
    if (nh >= nt && nt > 1 && (double)nh * Tq * Tk * D > 4.0 * CPU_PAR_MIN) {
        #pragma omp parallel for schedule(dynamic)
        for (int bh = 0; bh < nh; bh++)
            head_backward(bh / H, bh % H, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask,
                          ms, o, os, go, gos, lse, gq, gqs, gk, gks, gv, gvs,
                          work + per * omp_get_thread_num());
    } else {
        for (int bh = 0; bh < nh; bh++)
            head_backward(bh / H, bh % H, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask,
                          ms, o, os, go, gos, lse, gq, gqs, gk, gks, gv, gvs, work);
    }
}
