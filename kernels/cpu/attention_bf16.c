/* attention_bf16.c — one (batch, head) of unmasked attention under SGEMM_BF16 on an AVX512_BF16
 * CPU: the same arithmetic as the unfused path in that mode (every product's inputs rounded to
 * bf16, round to nearest even, fp32 accumulation: sgemm's bf16 packing and vdpbf16ps
 * 8x48 micro-kernel for the score tiles, its packing for Q, dO, K^T, V^T), with the softmax and
 * gradient steps done on each tile while it is in L1 instead of as passes over the whole score
 * block, and each operand packed once per head instead of once per sgemm call. Softmax, lse, Di
 * and dS are computed in fp32; the [. x D] products take their A operand (e, P^T, dS, dS^T) as
 * bf16 pairs written by those tile passes, read by broadcasts (own 6 x 64 tiles below): sgemm's
 * packing of a 197-deep 6-row A panel cost as much as the product.
 *   forward: per 24-row block, S_blk = scale Q K^T, e = exp(s - max) and its fp32 sum, e stored
 *            as bf16, O_blk = diag(1 / sum) e V.
 *   backward: per 8 x 48 tile, P = exp(scale Q K^T - lse) and dS = P (dO V^T - Di), stored as the
 *            bf16 pairs of P^T, dS^T and dS; then dV += P^T dO, dQ += scale dS K, dK += scale dS^T Q.
 * Each head prefetches the next head's rows over its row loop, as the fp32 kernels. The reference
 * is the unfused path (tests/kernels/test_attention_fused.c). Results depend only on the head's
 * inputs, not on the thread count. */
#include <stdint.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"

#define FWD_MB 24 /* forward rows per block */

static size_t r64(size_t floats) { return (floats + 15) / 16 * 16; } /* 64-byte multiples */
static size_t up(size_t n, size_t m) { return (n + m - 1) / m * m; }
/* floats of an sgemm bf16 panel set: `lines` rounded up to the panel width w, depth pairs of 2 uint16 */
static size_t panel_floats(size_t lines, size_t w, size_t depth) { return r64(up(lines, w) * ((depth + 1) / 2)); }

size_t attn_bf16_forward_floats(int Tq, int Tk, int D) {
    size_t ldt = up((size_t)Tk, 32);
    return 16 + panel_floats(Tk, 48, D) + panel_floats(D, 64, Tk) + panel_floats(FWD_MB, 8, D) +
           r64(FWD_MB * ldt / 2) + r64(FWD_MB * ldt) + r64(2 * FWD_MB) + r64((size_t)FWD_MB * D); /* + bf16 o's fp32 strip */
}

size_t attn_bf16_backward_floats(int Tq, int Tk, int D) {
    size_t ldt = up((size_t)Tk, 48), T = Tq > Tk ? Tq : Tk;
    return 16 + 2 * panel_floats(Tk, 48, D) + 2 * panel_floats(Tq, 8, D) + panel_floats(D, 64, T) +
           3 * r64((size_t)(Tq + 1) / 2 * ldt) + 2 * r64(8 * ldt) + r64(Tq) +
           r64(T * D); /* + the fp32 block of a bf16 gradient's product (one at a time) */
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma")
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/attention_fused_avx512.h" /* and vec_avx512.h: bf16x16_narrow, bf16x16_widen */

static float *align64(float *p) { return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* sgemm's bf16 8 x 48 micro-kernel (the score tiles). */
static gemm_ukr_bf16_fn ukr_8x48;
static void load_ukr(void) {
    if (ukr_8x48) return;
    int n = 0;
    const gemm_kernel *k = gemm_kernels_avx512bf16(&n);
    for (int i = 0; i < n; i++)
        if (k[i].mr == 8 && k[i].nr == 48) ukr_8x48 = k[i].fn_bf16;
}

/* C[r][0:16 NV] (+)= al[r als] sum_q A(r, q) . Bp[q][0:16 NV] over kp depth pairs: A(r, q) is the
 * 32-bit bf16 pair A[r ars + q acs], Bp an sgemm bf16 panel of 64 lines (64 pairs per q). */
#define AB16_TILE(MR, NV)                                                                          \
    static inline void ab16_##MR##x##NV(long kp, const float *al, int als, const int32_t *A, int64_t ars, \
                                        int64_t acs, const uint16_t *Bp, float *C, int64_t ldc, int acc) { \
        __m512 c[MR][NV];                                                                          \
        for (int r = 0; r < MR; r++)                                                               \
            for (int v = 0; v < NV; v++) c[r][v] = _mm512_setzero_ps();                            \
        for (long q = 0; q < kp; q++) {                                                            \
            __m512bh b[NV];                                                                        \
            for (int v = 0; v < NV; v++) b[v] = (__m512bh)_mm512_load_si512(Bp + q * 128 + 32 * v); \
            for (int r = 0; r < MR; r++) {                                                         \
                __m512bh a = (__m512bh)_mm512_set1_epi32(A[r * ars + q * acs]);                    \
                for (int v = 0; v < NV; v++) c[r][v] = _mm512_dpbf16_ps(c[r][v], a, b[v]);         \
            }                                                                                      \
        }                                                                                          \
        tile_store(&c[0][0], MR, NV, al, als, C, ldc, acc);                                        \
    }
#define AB16_SET(MR) AB16_TILE(MR, 4) AB16_TILE(MR, 3) AB16_TILE(MR, 2) AB16_TILE(MR, 1)
AB16_SET(6)
AB16_SET(4)
AB16_SET(2)
AB16_SET(1)

#define AB16_CALL(MR)                                                                              \
    do {                                                                                           \
        switch (nv) {                                                                              \
        case 4: ab16_##MR##x4(kp, al + i * als, als, a, ars, acs, Bp, c, ldc, acc); break;           \
        case 3: ab16_##MR##x3(kp, al + i * als, als, a, ars, acs, Bp, c, ldc, acc); break;           \
        case 2: ab16_##MR##x2(kp, al + i * als, als, a, ars, acs, Bp, c, ldc, acc); break;           \
        default: ab16_##MR##x1(kp, al + i * als, als, a, ars, acs, Bp, c, ldc, acc); break;          \
        }                                                                                          \
    } while (0)

/* C [M x D] (+)= diag(al) A Bp, 6-row tiles and 4/2/1-row tails. */
static void ab16_rows(int M, int D, long kp, const float *al, int als, const int32_t *A, int64_t ars, int64_t acs,
                      const uint16_t *Bp, float *C, int64_t ldc, int acc) {
    int nv = D / 16;
    for (int i = 0; i < M;) {
        int left = M - i, mr = left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const int32_t *a = A + i * ars;
        float *c = C + i * ldc;
        if (mr == 6) AB16_CALL(6); else if (mr == 4) AB16_CALL(4); else if (mr == 2) AB16_CALL(2); else AB16_CALL(1);
        i += mr;
    }
}

/* 16 bf16 of x (round to nearest even) into 8 pair words at p */
static inline void store_bf16(void *p, __m512 x) { _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(x)); }

/* bf16 pairs (lo[j], hi[j]) of 16 columns: the A operand of a product over rows (P^T, dS^T) */
static inline void store_pairs(void *p, __m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                         23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    _mm512_storeu_si512(p, _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo)));
}

/* The operands' storage: fp32 (packed to bf16 here, round to nearest even) or bf16 bits (packed as
 * they are). Both give the same panels for values bf16 holds, so the kernels' arithmetic is the same. */
static void pack_a16(int st16, int t, const void *A, long ld, int i0, int mc, int p0, int kc, int mr, uint16_t *P) {
    if (st16) gemm_pack_a_bf16_stored(t, A, ld, i0, mc, p0, kc, mr, P);
    else gemm_pack_a_bf16(t, A, ld, i0, mc, p0, kc, mr, P);
}
static void pack_b16(int st16, int t, const void *B, long ld, int p0, int kc, int j0, int nc, int nr, uint16_t *P) {
    if (st16) gemm_pack_b_bf16_stored(t, B, ld, p0, kc, j0, nc, nr, P);
    else gemm_pack_b_bf16(t, B, ld, p0, kc, j0, nc, nr, P);
}
/* 16 elements of row data at x + i as fp32 (bf16 widened: exact) */
static inline __m512 load16(int st16, const void *x, int64_t i) {
    return st16 ? bf16x16_widen(_mm256_loadu_si256((const __m256i *)((const uint16_t *)x + i))) : _mm512_loadu_ps((const float *)x + i);
}
/* rows [0, n) x D of the fp32 strip F (row stride D) into bf16 Y (row stride ldy): Y = round(F), or with
 * acc, round(Y + (0 + F)): what the fp32 kernel's output, written (acc 0) or added into zeroed scratch,
 * followed by a cast (accumulating with acc) gives. D % 16 == 0. */
static void round_rows(int n, int D, const float *F, uint16_t *Y, int64_t ldy, int acc) {
    for (int r = 0; r < n; r++)
        for (int d = 0; d < D; d += 16) {
            __m256i *y = (__m256i *)(Y + r * ldy + d);
            __m512 f = _mm512_loadu_ps(F + (int64_t)r * D + d);
            if (acc) f = _mm512_add_ps(bf16x16_widen(_mm256_loadu_si256(y)), _mm512_add_ps(_mm512_setzero_ps(), f));
            _mm256_storeu_si256(y, bf16x16_narrow(f));
        }
}

static void fwd_any(int st16, int Tq, int Tk, int D, float scale, const void *q, int64_t ldq, const void *k, int64_t ldk,
                    const void *v, int64_t ldv, void *o, int64_t ldo, float *lse, float *work, const attn_next *next) {
    load_ukr();
    int64_t ldt = (Tk + 31) / 32 * 32; /* row of S in floats; row of E in pairs: ldt / 2 */
    long kpd = (D + 1) / 2, kpt = (Tk + 1) / 2;
    float *w = align64(work);
    uint16_t *Kp = (uint16_t *)w;
    w += panel_floats(Tk, 48, D);
    uint16_t *Vp = (uint16_t *)w;
    w += panel_floats(D, 64, Tk);
    uint16_t *Qp = (uint16_t *)w;
    w += panel_floats(FWD_MB, 8, D);
    int32_t *E = (int32_t *)w;
    w += r64(FWD_MB * ldt / 2);
    float *S = w, *inv = S + r64(FWD_MB * ldt), *Ostrip = inv + r64(2 * FWD_MB); /* bf16 o: its fp32 rows */
    pack_b16(st16, 1, k, ldk, 0, D, 0, Tk, 48, Kp); /* op(B) = K^T: lines j, depth d */
    pack_b16(st16, 0, v, ldv, 0, Tk, 0, D, 64, Vp); /* op(B) = V: lines d, depth j */
    for (int i0 = 0; i0 < Tq; i0 += FWD_MB) {
        int mb = Tq - i0 < FWD_MB ? Tq - i0 : FWD_MB;
        pack_a16(st16, 0, q, ldq, i0, mb, 0, D, 8, Qp);
        for (int i = 0; i < mb; i += 8)
            for (int j = 0; j < Tk; j += 48)
                ukr_8x48(kpd, Qp + (size_t)i * 2 * kpd, Kp + (size_t)j * 2 * kpd, S + i * ldt + j, ldt, scale, 0.0f,
                         mb - i < 8 ? mb - i : 8, Tk - j < 48 ? Tk - j : 48);
        for (int r = 0; r < mb; r++) { /* e = exp(s - max) in fp32, summed unrounded, stored as bf16 */
            float *sr = S + r * ldt;
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int j = 0; j < Tk; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, tail_mask(Tk - j), sr + j));
            float m = _mm512_reduce_max_ps(mx);
            const __m512 vm = _mm512_set1_ps(m);
            __m512 acc = _mm512_setzero_ps();
            for (int j = 0; j < Tk; j += 16) { /* columns past Tk: 0 (the padding of the last pair) */
                __mmask16 km = tail_mask(Tk - j);
                __m512 e = _mm512_maskz_mov_ps(km, exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, km, sr + j), vm)));
                acc = _mm512_add_ps(acc, e);
                store_bf16(E + r * (ldt / 2) + j / 2, e);
            }
            float sum = _mm512_reduce_add_ps(acc);
            inv[r] = 1.0f / sum;
            lse[i0 + r] = m + logf(sum);
        }
        if (st16) {
            ab16_rows(mb, D, kpt, inv, 1, E, ldt / 2, 1, Vp, Ostrip, D, 0);
            round_rows(mb, D, Ostrip, (uint16_t *)o + i0 * ldo, ldo, 0);
        } else {
            ab16_rows(mb, D, kpt, inv, 1, E, ldt / 2, 1, Vp, (float *)o + i0 * ldo, ldo, 0);
        }
        prefetch_next(next, D, 0, i0 / FWD_MB, (Tq + FWD_MB - 1) / FWD_MB);
    }
}

void attn_bf16_forward(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq, const float *k,
                       int64_t ldk, const float *v, int64_t ldv, float *o, int64_t ldo, float *lse, float *work,
                       const attn_next *next) {
    fwd_any(0, Tq, Tk, D, scale, q, ldq, k, ldk, v, ldv, o, ldo, lse, work, next);
}
void attn_bf16_forward_stored(int Tq, int Tk, int D, float scale, const uint16_t *q, int64_t ldq, const uint16_t *k,
                              int64_t ldk, const uint16_t *v, int64_t ldv, uint16_t *o, int64_t ldo, float *lse, float *work,
                              const attn_next *next) {
    fwd_any(1, Tq, Tk, D, scale, q, ldq, k, ldk, v, ldv, o, ldo, lse, work, next);
}

/* st16: every tensor is bf16 bits; each gradient's product is then written to an fp32 block and added
 * into the bf16 one as round(old + (0 + product)), what the fp32 kernel adding into zeroed scratch
 * followed by an accumulating cast gives */
static void bwd_any(int st16, int Tq, int Tk, int D, float scale, const void *q, int64_t ldq, const void *k, int64_t ldk,
                    const void *v, int64_t ldv, const void *o, int64_t ldo, const void *go, int64_t ldgo, const float *lse,
                    void *gq, int64_t ldgq, void *gk, int64_t ldgk, void *gv, int64_t ldgv, float *work,
                    const attn_next *next) {
    load_ukr();
    int64_t ldt = (Tk + 47) / 48 * 48; /* pairs per row of P^T / dS^T; floats per row of the tiles; 2x dS's */
    long kpd = (D + 1) / 2, kpq = (Tq + 1) / 2, kpt = (Tk + 1) / 2;
    int T = Tq > Tk ? Tq : Tk;
    float *w = align64(work);
    uint16_t *Kp = (uint16_t *)w;
    w += panel_floats(Tk, 48, D);
    uint16_t *Vp = (uint16_t *)w;
    w += panel_floats(Tk, 48, D);
    uint16_t *Qp = (uint16_t *)w;
    w += panel_floats(Tq, 8, D);
    uint16_t *Gp = (uint16_t *)w;
    w += panel_floats(Tq, 8, D);
    uint16_t *Bp = (uint16_t *)w;
    w += panel_floats(D, 64, T);
    int32_t *PT = (int32_t *)w, *ST = PT + r64(kpq * ldt), *Sb = ST + r64(kpq * ldt); /* P^T, dS^T pairs; dS pairs */
    w += 3 * r64(kpq * ldt);
    float *Pt = w, *dPt = Pt + r64(8 * ldt), *Di = dPt + r64(8 * ldt); /* one 8-row strip of P and dP */
    float *G = Di + r64(Tq); /* st16: each gradient's product in fp32, before it is added into bf16 */
    pack_b16(st16, 1, k, ldk, 0, D, 0, Tk, 48, Kp); /* K^T and V^T: lines j, depth d */
    pack_b16(st16, 1, v, ldv, 0, D, 0, Tk, 48, Vp);
    pack_a16(st16, 0, q, ldq, 0, Tq, 0, D, 8, Qp);
    pack_a16(st16, 0, go, ldgo, 0, Tq, 0, D, 8, Gp);
    for (int i = 0; i < Tq; i++) { /* Di = dO_i . O_i in fp32 */
        __m512 s = _mm512_setzero_ps();
        for (int d = 0; d < D; d += 16) s = _mm512_fmadd_ps(load16(st16, go, i * ldgo + d), load16(st16, o, i * ldo + d), s);
        Di[i] = _mm512_reduce_add_ps(s);
    }
    for (int i = 0; i < Tq; i += 8) {
        int mr = Tq - i < 8 ? Tq - i : 8;
        prefetch_next(next, D, 1, i / 8, (Tq + 7) / 8);
        for (int j = 0; j < Tk; j += 48) {
            int nr = Tk - j < 48 ? Tk - j : 48;
            ukr_8x48(kpd, Qp + (size_t)i * 2 * kpd, Kp + (size_t)j * 2 * kpd, Pt + j, ldt, scale, 0.0f, mr, nr);
            ukr_8x48(kpd, Gp + (size_t)i * 2 * kpd, Vp + (size_t)j * 2 * kpd, dPt + j, ldt, 1.0f, 0.0f, mr, nr);
            /* the tile, still in L1, two rows at a time: P = exp(s - lse), dS = P (dP - Di); rows past
             * Tq and columns past Tk are 0 (the padding of the last pairs) */
            for (int r = 0; r < mr; r += 2)
                for (int c = 0; c < 48; c += 16) {
                    __m512 p[2], ds[2];
                    for (int h = 0; h < 2; h++) {
                        __mmask16 m = r + h < mr ? tail_mask(nr - c) : 0;
                        const float *pp = Pt + (r + h) * ldt + j + c, *dp = dPt + (r + h) * ldt + j + c;
                        float l = r + h < mr ? lse[i + r + h] : 0.0f, di = r + h < mr ? Di[i + r + h] : 0.0f;
                        p[h] = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, pp), _mm512_set1_ps(l))));
                        ds[h] = _mm512_mul_ps(p[h], _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dp), _mm512_set1_ps(di)));
                    }
                    int64_t qi = (i + r) / 2;
                    store_pairs(PT + qi * ldt + j + c, p[0], p[1]);
                    store_pairs(ST + qi * ldt + j + c, ds[0], ds[1]);
                    store_bf16(Sb + (i + r) * (ldt / 2) + (j + c) / 2, ds[0]);
                    if (r + 1 < mr) store_bf16(Sb + (i + r + 1) * (ldt / 2) + (j + c) / 2, ds[1]);
                }
        }
    }
    const float one = 1.0f;
    if (gv) { /* dV += P^T dO */
        pack_b16(st16, 0, go, ldgo, 0, Tq, 0, D, 64, Bp);
        ab16_rows(Tk, D, kpq, &one, 0, PT, 1, ldt, Bp, st16 ? G : gv, st16 ? D : ldgv, !st16);
        if (st16) round_rows(Tk, D, G, gv, ldgv, 1);
    }
    if (gq) { /* dQ += scale dS K */
        pack_b16(st16, 0, k, ldk, 0, Tk, 0, D, 64, Bp);
        ab16_rows(Tq, D, kpt, &scale, 0, Sb, ldt / 2, 1, Bp, st16 ? G : gq, st16 ? D : ldgq, !st16);
        if (st16) round_rows(Tq, D, G, gq, ldgq, 1);
    }
    if (gk) { /* dK += scale dS^T Q */
        pack_b16(st16, 0, q, ldq, 0, Tq, 0, D, 64, Bp);
        ab16_rows(Tk, D, kpq, &scale, 0, ST, 1, ldt, Bp, st16 ? G : gk, st16 ? D : ldgk, !st16);
        if (st16) round_rows(Tk, D, G, gk, ldgk, 1);
    }
}

void attn_bf16_backward(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, const float *v, int64_t ldv, const float *o, int64_t ldo, const float *go,
                        int64_t ldgo, const float *lse, float *gq, int64_t ldgq, float *gk, int64_t ldgk, float *gv,
                        int64_t ldgv, float *work, const attn_next *next) {
    bwd_any(0, Tq, Tk, D, scale, q, ldq, k, ldk, v, ldv, o, ldo, go, ldgo, lse, gq, ldgq, gk, ldgk, gv, ldgv, work, next);
}
void attn_bf16_backward_stored(int Tq, int Tk, int D, float scale, const uint16_t *q, int64_t ldq, const uint16_t *k,
                               int64_t ldk, const uint16_t *v, int64_t ldv, const uint16_t *o, int64_t ldo,
                               const uint16_t *go, int64_t ldgo, const float *lse, uint16_t *gq, int64_t ldgq, uint16_t *gk,
                               int64_t ldgk, uint16_t *gv, int64_t ldgv, float *work, const attn_next *next) {
    bwd_any(1, Tq, Tk, D, scale, q, ldq, k, ldk, v, ldv, o, ldo, go, ldgo, lse, gq, ldgq, gk, ldgk, gv, ldgv, work, next);
}

#pragma GCC pop_options
#else
/* Not x86-64 GCC/Clang: cpu_has_avx512_bf16() is 0, so these are never called. */
void attn_bf16_forward(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq, const float *k,
                       int64_t ldk, const float *v, int64_t ldv, float *o, int64_t ldo, float *lse, float *work,
                       const attn_next *next) {
    (void)Tq, (void)Tk, (void)D, (void)scale, (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv;
    (void)o, (void)ldo, (void)lse, (void)work, (void)next;
}
void attn_bf16_forward_stored(int Tq, int Tk, int D, float scale, const uint16_t *q, int64_t ldq, const uint16_t *k,
                              int64_t ldk, const uint16_t *v, int64_t ldv, uint16_t *o, int64_t ldo, float *lse, float *work,
                              const attn_next *next) {
    (void)Tq, (void)Tk, (void)D, (void)scale, (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv;
    (void)o, (void)ldo, (void)lse, (void)work, (void)next;
}
void attn_bf16_backward_stored(int Tq, int Tk, int D, float scale, const uint16_t *q, int64_t ldq, const uint16_t *k,
                               int64_t ldk, const uint16_t *v, int64_t ldv, const uint16_t *o, int64_t ldo,
                               const uint16_t *go, int64_t ldgo, const float *lse, uint16_t *gq, int64_t ldgq, uint16_t *gk,
                               int64_t ldgk, uint16_t *gv, int64_t ldgv, float *work, const attn_next *next) {
    (void)Tq, (void)Tk, (void)D, (void)scale, (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv, (void)o, (void)ldo;
    (void)go, (void)ldgo, (void)lse, (void)gq, (void)ldgq, (void)gk, (void)ldgk, (void)gv, (void)ldgv, (void)work, (void)next;
}
void attn_bf16_backward(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, const float *v, int64_t ldv, const float *o, int64_t ldo, const float *go,
                        int64_t ldgo, const float *lse, float *gq, int64_t ldgq, float *gk, int64_t ldgk, float *gv,
                        int64_t ldgv, float *work, const attn_next *next) {
    (void)Tq, (void)Tk, (void)D, (void)scale, (void)q, (void)ldq, (void)k, (void)ldk, (void)v, (void)ldv;
    (void)o, (void)ldo, (void)go, (void)ldgo, (void)lse, (void)gq, (void)ldgq, (void)gk, (void)ldgk;
    (void)gv, (void)ldgv, (void)work, (void)next;
}
#endif
