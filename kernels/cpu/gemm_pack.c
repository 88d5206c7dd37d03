/* gemm_pack.c — copy blocks of op(A) and op(B) into the contiguous, k-major micro-panels the
 * micro-kernels stream through (layouts in gemm_internal.h). Transposition is handled here, so
 * the micro-kernels see one layout for all four transA/transB combinations. Edges are zero-padded.
 *
 * Loop order follows the source layout: when a depth step p is a contiguous row of the source
 * (A transposed, B not), the p loop is outermost and each source row is read once, left to right,
 * across all panels; otherwise a panel's rows are read side by side. Walking one panel at a time
 * down a row-major source would touch a new page per step. */
#include <stdint.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/cpu/gemm_internal.h"

/* Copy `len` floats of a contiguous run into a panel row and zero the rest up to `width`. */
static inline void copy_pad(float *restrict d, const float *restrict s, int len, int width) {
    int j = 0;
    for (; j < len; j++) d[j] = s[j];
    for (; j < width; j++) d[j] = 0.0f;
}

/* Panels cut from a source whose depth steps are contiguous rows (op(X)[.., p] = X[p][..]). */
static void pack_rows_by_depth(const float *X, long ldx, int p0, int kc, int c0, int len, int w,
                               float *P) {
    int npan = (len + w - 1) / w;
    for (int p = 0; p < kc; p++) {
        const float *s = X + (long)(p0 + p) * ldx + c0;
        for (int q = 0; q < npan; q++) {
            int cnt = len - q * w < w ? len - q * w : w;
            copy_pad(P + (long)q * w * kc + (long)p * w, s + q * w, cnt, w);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_TRANSPOSE 1
/* 8 source lines x 8 depth steps -> 8 panel rows of 8 consecutive floats: one in-register 8x8
 * transpose (AVX2) instead of 64 scalar strided stores. Called only when the CPU has AVX2. */
__attribute__((target("avx2"))) static void transpose_8x8_strips(const float *src, long ldx,
                                                                  int kc8, int w, float *d) {
    for (int p = 0; p < kc8; p += 8, d += 8L * w) gemm_transpose_8x8(src + p, ldx, d, w);
}
#endif

/* Panels cut from a source whose rows are the panel's lines (op(X)[r, p] = X[r][p]): per panel,
 * read its `w` source rows side by side in 8-deep strips so the strip being written stays in L1.
 * Groups of 8 full lines go through the AVX2 8x8 transpose when the CPU has it. */
static void pack_rows_by_line(const float *X, long ldx, int p0, int kc, int r0, int len, int w,
                              float *P) {
#ifdef HAVE_AVX2_TRANSPOSE
    const int fast = cpu_has_avx2_fma();
#else
    const int fast = 0;
#endif
    for (int q = 0; q * w < len; q++, P += (long)w * kc) {
        int cnt = len - q * w < w ? len - q * w : w;
        const float *src = X + (long)(r0 + q * w) * ldx + p0;
        int p = 0;
#ifdef HAVE_AVX2_TRANSPOSE
        if (fast && cnt == w && w % 8 == 0 && kc >= 8) {
            int kc8 = kc / 8 * 8;
            for (int g = 0; g < w; g += 8) transpose_8x8_strips(src + (long)g * ldx, ldx, kc8, w, P + g);
            p = kc8;
        }
#endif
        for (; p + 8 <= kc; p += 8) {
            float *d = P + (long)p * w;
            for (int r = 0; r < cnt; r++) {
                const float *s = src + (long)r * ldx + p;
                for (int t = 0; t < 8; t++) d[t * w + r] = s[t];
            }
            for (int r = cnt; r < w; r++)
                for (int t = 0; t < 8; t++) d[t * w + r] = 0.0f;
        }
        for (; p < kc; p++) {
            float *d = P + (long)p * w;
            int r = 0;
            for (; r < cnt; r++) d[r] = src[(long)r * ldx + p];
            for (; r < w; r++) d[r] = 0.0f;
        }
    }
}

void gemm_pack_a(int transA, const float *A, long lda, int i0, int mc, int p0, int kc, int mr,
                 float *Ap) {
    if (transA) pack_rows_by_depth(A, lda, p0, kc, i0, mc, mr, Ap);  /* A stored k x m */
    else pack_rows_by_line(A, lda, p0, kc, i0, mc, mr, Ap);          /* A stored m x k */
}

void gemm_pack_b(int transB, const float *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                 float *Bp) {
    if (transB) pack_rows_by_line(B, ldb, p0, kc, j0, nc, nr, Bp);   /* B stored n x k */
    else pack_rows_by_depth(B, ldb, p0, kc, j0, nc, nr, Bp);         /* B stored k x n */
}

/* ---- bf16-stored sources widened into fp32 panels (gemm_ex with bf16 A or B on a CPU without
 * AVX512_BF16, or with an fp32 kernel set forced): widening is exact, so the product is the fp32
 * path's on the widened values. Plain loops: this is the fallback, not the fast path. */
static inline float widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void widen_by_depth(const uint16_t *X, long ldx, int p0, int kc, int c0, int len, int w, float *P) {
    int npan = (len + w - 1) / w;
    for (int p = 0; p < kc; p++) {
        const uint16_t *s = X + (long)(p0 + p) * ldx + c0;
        for (int q = 0; q < npan; q++) {
            int cnt = len - q * w < w ? len - q * w : w, j = 0;
            float *d = P + (long)q * w * kc + (long)p * w;
            for (; j < cnt; j++) d[j] = widen(s[q * w + j]);
            for (; j < w; j++) d[j] = 0.0f;
        }
    }
}

static void widen_by_line(const uint16_t *X, long ldx, int p0, int kc, int r0, int len, int w, float *P) {
    for (int q = 0; q * w < len; q++, P += (long)w * kc) {
        int cnt = len - q * w < w ? len - q * w : w;
        const uint16_t *src = X + (long)(r0 + q * w) * ldx + p0;
        for (int r = 0; r < w; r++)
            for (int p = 0; p < kc; p++) P[(long)p * w + r] = r < cnt ? widen(src[(long)r * ldx + p]) : 0.0f;
    }
}

void gemm_pack_a_widened(int transA, const uint16_t *A, long lda, int i0, int mc, int p0, int kc, int mr, float *Ap) {
    if (transA) widen_by_depth(A, lda, p0, kc, i0, mc, mr, Ap);
    else widen_by_line(A, lda, p0, kc, i0, mc, mr, Ap);
}

void gemm_pack_b_widened(int transB, const uint16_t *B, long ldb, int p0, int kc, int j0, int nc, int nr, float *Bp) {
    if (transB) widen_by_line(B, ldb, p0, kc, j0, nc, nr, Bp);
    else widen_by_depth(B, ldb, p0, kc, j0, nc, nr, Bp);
}

void gemm_round_bf16(float *P, long n) {
    for (long i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &P[i], 4);
        if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) u |= 0x00400000u; /* quiet NaN */
        else u += 0x7fffu + ((u >> 16) & 1u);                                     /* nearest even */
        u &= 0xffff0000u;
        memcpy(&P[i], &u, 4);
    }
}
