/* attention_avx512.c — one (batch, head) of unmasked attention, forward and backward, with the
 * softmax and the gradient's elementwise steps fused into the per-head products (AVX-512, head
 * width D % 16 == 0, D <= 64). The reference is the unfused path in attention.c (sgemm or the
 * products of simd_avx512.c, then separate softmax / exp / dS passes over the score block);
 * tests/kernels/test_attention_fused.c compares the two.
 *
 * Why fused: on a ViT-S head (197 x 197 x 64) the products run near the core's FMA peak, but the
 * passes between them (softmax: max, exp + sum, scale; backward: exp(S - lse), dS = P (dP - Di))
 * each read and write the 160 KB score block in L2 and cost about a quarter of the head.
 *   forward: row blocks of FWD_MB rows: S_blk = scale Q_blk K^T into an L1 buffer, per row max,
 *            e = exp(s - max) and its sum in one pass, then O_blk = diag(1 / sum) e V (the
 *            normalisation is the product's per-row alpha, no pass of its own).
 *   backward: P = exp(scale Q K^T - lse) is the epilogue of the Q K^T tile, dS = P (dO V^T - Di)
 *            the epilogue of the dO V^T tile; then dV += P^T dO, dQ += scale dS K, dK += scale dS^T Q.
 * Each head prefetches the next head's rows (prefetch_next) spread over its row loop. Results
 * depend only on the head's inputs, not on the thread count. */
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,fma")
#include <immintrin.h>
#include <math.h>

#define FWD_MB 24 /* forward rows per block: S_blk [24 x round16(Tk)] stays in L1 for Tk <= 400 */

#include "kernels/cpu/attention_fused_avx512.h"

/* Q K^T-type tile: MR rows x NV vectors of 16 columns, sum over d of A[r lda + d] Bt[d ldb + j].
 * Epilogues: 0 store alpha acc; 1 store exp(alpha acc - rv[r]) (P from the saved lse);
 * 2 store P[r][j] (acc - rv[r]) into C, P read at the same place in X (dS from dP and Di). */
#define ABT_TILE(EPI, MR, NV)                                                                      \
    static inline void abt##EPI##_##MR##x##NV(int D, int nc, float alpha, const float *A, int64_t lda, \
                                              const float *Bt, int64_t ldb, float *C, int64_t ldc,  \
                                              const float *rv, const float *X) {                    \
        __m512 c[MR][NV];                                                                          \
        for (int r = 0; r < MR; r++)                                                               \
            for (int v = 0; v < NV; v++) c[r][v] = _mm512_setzero_ps();                            \
        for (int d = 0; d < D; d++) {                                                              \
            __m512 b[NV];                                                                          \
            for (int v = 0; v < NV; v++) b[v] = _mm512_loadu_ps(Bt + d * ldb + 16 * v);            \
            for (int r = 0; r < MR; r++) {                                                         \
                __m512 a = _mm512_set1_ps(A[r * lda + d]);                                         \
                for (int v = 0; v < NV; v++) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);          \
            }                                                                                      \
        }                                                                                          \
        const __m512 al = _mm512_set1_ps(alpha);                                                   \
        for (int r = 0; r < MR; r++) {                                                             \
            __m512 rr = _mm512_set1_ps(EPI ? rv[r] : 0.0f);                                        \
            for (int v = 0; v < NV; v++) {                                                         \
                __mmask16 m = tail_mask(nc - 16 * v);                                                  \
                __m512 o;                                                                          \
                if (EPI == 0) o = _mm512_mul_ps(al, c[r][v]);                                      \
                else if (EPI == 1) o = exp16(_mm512_fmsub_ps(al, c[r][v], rr));                   \
                else o = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, X + r * ldc + 16 * v),             \
                                       _mm512_sub_ps(c[r][v], rr));                                \
                _mm512_mask_storeu_ps(C + r * ldc + 16 * v, m, o);                                 \
            }                                                                                      \
        }                                                                                          \
    }
#define ABT_SET(EPI, MR) ABT_TILE(EPI, MR, 3) ABT_TILE(EPI, MR, 2) ABT_TILE(EPI, MR, 1)
#define ABT_ALL(EPI) ABT_SET(EPI, 8) ABT_SET(EPI, 4) ABT_SET(EPI, 2) ABT_SET(EPI, 1)
ABT_ALL(0)
ABT_ALL(1)
ABT_ALL(2)

#define ABT_CALL(EPI, MR)                                                                          \
    do {                                                                                           \
        const float *r_ = rv ? rv + i : NULL; /* epilogue 0 reads no row values */                  \
        if (nv == 3) abt##EPI##_##MR##x3(D, nc, alpha, a, lda, bt, ldb, c, ldc, r_, x);            \
        else if (nv == 2) abt##EPI##_##MR##x2(D, nc, alpha, a, lda, bt, ldb, c, ldc, r_, x);       \
        else abt##EPI##_##MR##x1(D, nc, alpha, a, lda, bt, ldb, c, ldc, r_, x);                    \
    } while (0)

/* Rows [i0, i1) of C [M x N] (row stride ldc) through epilogue epi: 8-row tiles, the rest in
 * 4-, 2- and 1-row tiles (a 197-row head: 24 x 8 + 4 + 1). X has C's layout (epilogue 2). */
static void abt_rows(int epi, int i0, int i1, int N, int D, float alpha, const float *A, int64_t lda,
                     const float *Bt, int64_t ldb, float *C, int64_t ldc, const float *rv, const float *X) {
    for (int j = 0; j < N; j += 48) {
        int nc = N - j < 48 ? N - j : 48, nv = (nc + 15) / 16;
        for (int i = i0; i < i1;) {
            int left = i1 - i, mr = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
            const float *a = A + i * lda, *bt = Bt + j;
            float *c = C + i * ldc + j;
            const float *x = X ? X + i * ldc + j : NULL;
            if (epi == 0) {
                if (mr == 8) ABT_CALL(0, 8); else if (mr == 4) ABT_CALL(0, 4); else if (mr == 2) ABT_CALL(0, 2); else ABT_CALL(0, 1);
            } else if (epi == 1) {
                if (mr == 8) ABT_CALL(1, 8); else if (mr == 4) ABT_CALL(1, 4); else if (mr == 2) ABT_CALL(1, 2); else ABT_CALL(1, 1);
            } else {
                if (mr == 8) ABT_CALL(2, 8); else if (mr == 4) ABT_CALL(2, 4); else if (mr == 2) ABT_CALL(2, 2); else ABT_CALL(2, 1);
            }
            i += mr;
        }
    }
}

/* A B-type tile: C[r][0:16 NV] (+)= al[r als] sum_j A(r, j) B[j ldb + 0:16 NV], A(r, j) = A[r ars + j acs]
 * (a per-row alpha: the forward's 1 / sum; als = 0 for one alpha). */
#define AB_TILE(MR, NV)                                                                            \
    static inline void ab_##MR##x##NV(int K, const float *al, int als, const float *A, int64_t ars,  \
                                      int64_t acs, const float *B, int64_t ldb, float *C, int64_t ldc, \
                                      int acc) {                                                   \
        __m512 c[MR][NV];                                                                          \
        for (int r = 0; r < MR; r++)                                                               \
            for (int v = 0; v < NV; v++) c[r][v] = _mm512_setzero_ps();                            \
        for (int j = 0; j < K; j++) {                                                              \
            __m512 b[NV];                                                                          \
            for (int v = 0; v < NV; v++) b[v] = _mm512_loadu_ps(B + j * ldb + 16 * v);             \
            for (int r = 0; r < MR; r++) {                                                         \
                __m512 a = _mm512_set1_ps(A[r * ars + j * acs]);                                   \
                for (int v = 0; v < NV; v++) c[r][v] = _mm512_fmadd_ps(a, b[v], c[r][v]);          \
            }                                                                                      \
        }                                                                                          \
        tile_store(&c[0][0], MR, NV, al, als, C, ldc, acc);                                        \
    }
#define AB_SET(MR) AB_TILE(MR, 4) AB_TILE(MR, 3) AB_TILE(MR, 2) AB_TILE(MR, 1)
AB_SET(6)
AB_SET(4)
AB_SET(2)
AB_SET(1)

#define AB_CALL(MR)                                                                                \
    do {                                                                                           \
        switch (nv) {                                                                              \
        case 4: ab_##MR##x4(K, al + i * als, als, a, ars, acs, B, ldb, c, ldc, acc); break;         \
        case 3: ab_##MR##x3(K, al + i * als, als, a, ars, acs, B, ldb, c, ldc, acc); break;         \
        case 2: ab_##MR##x2(K, al + i * als, als, a, ars, acs, B, ldb, c, ldc, acc); break;         \
        default: ab_##MR##x1(K, al + i * als, als, a, ars, acs, B, ldb, c, ldc, acc); break;        \
        }                                                                                          \
    } while (0)

/* C [M x D] (+)= diag(al) op(A) B over K terms, 6-row tiles and 4/2/1-row tails. */
static void ab_rows(int M, int D, int K, const float *al, int als, const float *A, int64_t ars,
                    int64_t acs, const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
    int nv = D / 16;
    for (int i = 0; i < M;) {
        int left = M - i, mr = left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const float *a = A + i * ars;
        float *c = C + i * ldc;
        if (mr == 6) AB_CALL(6); else if (mr == 4) AB_CALL(4); else if (mr == 2) AB_CALL(2); else AB_CALL(1);
        i += mr;
    }
}

size_t attn_fused_forward_floats(int Tq, int Tk, int D) {
    size_t ldt = ((size_t)Tk + 15) / 16 * 16;
    return (size_t)D * ldt + (size_t)FWD_MB * ldt + 2 * FWD_MB;
}

void attn_fused_forward_avx512(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq,
                               const float *k, int64_t ldk, const float *v, int64_t ldv, float *o,
                               int64_t ldo, float *lse, float *work, const attn_next *next) {
    int64_t ldt = ((int64_t)Tk + 15) / 16 * 16;
    float *kt = work, *S = kt + D * ldt, *inv = S + FWD_MB * ldt;
    pack_transposed_avx512(Tk, D, k, ldk, kt, ldt);
    int nb = (Tq + FWD_MB - 1) / FWD_MB;
    for (int blk = 0; blk < nb; blk++) {
        int i0 = blk * FWD_MB, mb = Tq - i0 < FWD_MB ? Tq - i0 : FWD_MB;
        abt_rows(0, 0, mb, Tk, D, scale, q + i0 * ldq, ldq, kt, ldt, S, ldt, NULL, NULL);
        for (int r = 0; r < mb; r++) {
            float m, s = exp_row(S + r * ldt, Tk, &m);
            inv[r] = 1.0f / s;
            lse[i0 + r] = m + logf(s);
        }
        ab_rows(mb, D, Tk, inv, 1, S, ldt, 1, v, ldv, o + i0 * ldo, ldo, 0);
        prefetch_next(next, D, 0, blk, nb);
    }
}

size_t attn_fused_backward_floats(int Tq, int Tk, int D) {
    size_t ldt = ((size_t)Tk + 15) / 16 * 16;
    return 2 * (size_t)D * ldt + 2 * (size_t)Tq * ldt + (size_t)Tq;
}

void attn_fused_backward_avx512(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq,
                                const float *k, int64_t ldk, const float *v, int64_t ldv,
                                const float *o, int64_t ldo, const float *go, int64_t ldgo,
                                const float *lse, float *gq, int64_t ldgq, float *gk, int64_t ldgk,
                                float *gv, int64_t ldgv, float *work, const attn_next *next) {
    int64_t ldt = ((int64_t)Tk + 15) / 16 * 16;
    float *kt = work, *vt = kt + D * ldt, *P = vt + D * ldt, *dS = P + Tq * ldt, *Di = dS + Tq * ldt;
    pack_transposed_avx512(Tk, D, k, ldk, kt, ldt);
    pack_transposed_avx512(Tk, D, v, ldv, vt, ldt);
    int nb = (Tq + 7) / 8;
    for (int blk = 0; blk < nb; blk++) { /* rows in groups of 8: P, Di, dS */
        int i0 = blk * 8, i1 = i0 + 8 < Tq ? i0 + 8 : Tq;
        abt_rows(1, i0, i1, Tk, D, scale, q, ldq, kt, ldt, P, ldt, lse, NULL);
        for (int i = i0; i < i1; i++) { /* Di = dO_i . O_i, D a multiple of 16 */
            __m512 s = _mm512_setzero_ps();
            for (int d = 0; d < D; d += 16)
                s = _mm512_fmadd_ps(_mm512_loadu_ps(go + i * ldgo + d), _mm512_loadu_ps(o + i * ldo + d), s);
            Di[i] = _mm512_reduce_add_ps(s);
        }
        abt_rows(2, i0, i1, Tk, D, 1.0f, go, ldgo, vt, ldt, dS, ldt, Di, P);
        prefetch_next(next, D, 1, blk, nb);
    }
    const float one = 1.0f;
    if (gv) ab_rows(Tk, D, Tq, &one, 0, P, 1, ldt, go, ldgo, gv, ldgv, 1);     /* dV += P^T dO */
    if (gq) ab_rows(Tq, D, Tk, &scale, 0, dS, ldt, 1, k, ldk, gq, ldgq, 1);   /* dQ += scale dS K */
    if (gk) ab_rows(Tk, D, Tq, &scale, 0, dS, 1, ldt, q, ldq, gk, ldgk, 1);   /* dK += scale dS^T Q */
}

#pragma GCC pop_options
#else
/* Not x86-64 GCC/Clang: cpu_simd() is 0, so these are never called. */
size_t attn_fused_forward_floats(int Tq, int Tk, int D) { (void)Tq, (void)Tk, (void)D; return 0; }
size_t attn_fused_backward_floats(int Tq, int Tk, int D) { (void)Tq, (void)Tk, (void)D; return 0; }
void attn_fused_forward_avx512(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq,
                               const float *k, int64_t ldk, const float *v, int64_t ldv, float *o,
                               int64_t ldo, float *lse, float *work, const attn_next *next) {
    (void)Tq, (void)Tk, (void)D, (void)scale, (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv;
    (void)o, (void)ldo, (void)lse, (void)work, (void)next;
}
void attn_fused_backward_avx512(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq,
                                const float *k, int64_t ldk, const float *v, int64_t ldv,
                                const float *o, int64_t ldo, const float *go, int64_t ldgo,
                                const float *lse, float *gq, int64_t ldgq, float *gk, int64_t ldgk,
                                float *gv, int64_t ldgv, float *work, const attn_next *next) {
    (void)Tq, (void)Tk, (void)D, (void)scale, (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv;
    (void)o, (void)ldo, (void)go, (void)ldgo, (void)lse, (void)gq, (void)ldgq, (void)gk, (void)ldgk;
    (void)gv, (void)ldgv, (void)work, (void)next;
}
#endif
