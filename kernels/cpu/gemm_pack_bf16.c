/* gemm_pack_bf16.c — packing for the native bf16 path (SGEMM_BF16 on a CPU with AVX512_BF16):
 * blocks of op(A) / op(B) are converted from fp32 to bf16 (vcvtne2ps2bf16: round to nearest
 * even) and stored as the k-pair-interleaved micro-panels that vdpbf16ps consumes.
 *
 * Layout of one panel of `w` lines (MR rows of op(A) or NR columns of op(B)) and kc depth steps,
 * kp = ceil(kc/2) pairs, as uint16: P[q*2w + 2r + (p&1)] = bf16(op(X)[line r, depth 2q + (p&1)]),
 * i.e. for each depth pair q, w 32-bit words each holding (depth 2q, depth 2q+1) of one line.
 * An odd kc is padded with a zero depth step, lines past the edge with zeros, so the kernel
 * always runs full pairs on a full tile. Called only after cpu_has_avx512_bf16() said yes.
 *
 * A source already stored as bf16 (gemm_pack_*_bf16_stored: gemm_ex with bf16 A or B) is packed
 * by moving its 16-bit words into the same layout, no conversion: the panel holds the bits that
 * packing its widened fp32 copy would (rounding a widened bf16 is exact; the one difference, a
 * subnormal that vcvtne2ps2bf16 flushes to zero, is read as zero by vdpbf16ps either way). */
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/gemm_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16")
#include <immintrin.h>

static inline __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u); }

/* Two rows of 16 fp32 (depth p and p+1 of 16 lines) -> 16 interleaved (p, p+1) bf16 pairs. */
static inline __m512i interleave_pair(__m512 lo, __m512 hi) {
    /* cvtne2ps_pbh(hi, lo): words 0..15 = bf16(lo), 16..31 = bf16(hi); then word 2j = lo[j],
     * word 2j+1 = hi[j]. */
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                         23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512i w = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    return _mm512_permutexvar_epi16(idx, w);
}

/* 16 lines of depth steps p (at s0 + off) and p+1 (s1 + off, NULL past an odd kc) -> 16 (p, p+1)
 * pair-words; masked lanes are zero. bf16 sources: word j = lo[j] | hi[j] << 16, the same order. */
static inline __attribute__((always_inline)) __m512i depth_pairs(const void *s0, const void *s1, long off,
                                                                 __mmask16 m, int src_bf16) {
    if (src_bf16) {
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)s0 + off));
        if (!s1) return lo;
        __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)s1 + off));
        return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
    }
    __m512 lo = _mm512_maskz_loadu_ps(m, (const float *)s0 + off);
    __m512 hi = s1 ? _mm512_maskz_loadu_ps(m, (const float *)s1 + off) : _mm512_setzero_ps();
    return interleave_pair(lo, hi);
}

/* Source whose depth steps are contiguous rows: op(X)[line c, depth p] = X[p][c]; X holds fp32, or
 * bf16 when src_bf16 (a constant in each caller, so each form compiles on its own). */
static inline __attribute__((always_inline)) void pack_bf16_by_depth_t(const void *X, long ldx, int p0, int kc,
                                                                       int c0, int len, int w, uint16_t *P,
                                                                       int src_bf16) {
    const int kp = (kc + 1) / 2, npan = (len + w - 1) / w;
    const long esz = src_bf16 ? 2 : 4;
    if (w == 8) { /* 8-line panels (op(A) of a tn product): two panels per 16-lane register */
        for (int q = 0; q < kp; q++) {
            const char *s0 = (const char *)X + ((long)(p0 + 2 * q) * ldx + c0) * esz;
            const char *s1 = 2 * q + 1 < kc ? s0 + ldx * esz : NULL;
            for (int pan = 0; pan < npan; pan += 2) {
                __m512i v = depth_pairs(s0, s1, pan * 8, mask16(len - pan * 8), src_bf16);
                uint16_t *d = P + (long)pan * 16 * kp + (long)q * 16;
                _mm256_storeu_si256((__m256i *)d, _mm512_castsi512_si256(v));
                if (pan + 1 < npan) _mm256_storeu_si256((__m256i *)(d + 16L * kp), _mm512_extracti64x4_epi64(v, 1));
            }
        }
        return;
    }
    for (int q = 0; q < kp; q++) {
        const char *s0 = (const char *)X + ((long)(p0 + 2 * q) * ldx + c0) * esz;
        const char *s1 = 2 * q + 1 < kc ? s0 + ldx * esz : NULL;  /* odd kc: zero second step */
        for (int pan = 0; pan < npan; pan++) {
            uint16_t *d = P + (long)pan * w * 2 * kp + (long)q * 2 * w;
            int cnt = len - pan * w < w ? len - pan * w : w;
            for (int g = 0; g < w; g += 16) {
                int width = w - g < 16 ? w - g : 16;
                __m512i v = depth_pairs(s0, s1, pan * w + g, mask16(cnt - g), src_bf16);
                if (width == 16) _mm512_storeu_si512(d + 2 * g, v);
                else _mm512_mask_storeu_epi16(d + 2 * g, (__mmask32)((1ull << (2 * width)) - 1u), v);
            }
        }
    }
}

/* 8 rows of 8 32-bit words at src (row stride 16 words) -> 8 rows of 8 words at d (stride w). */
static inline void transpose_8x8_words(const uint32_t *src, uint32_t *d, int w) {
    gemm_transpose_8x8((const float *)src, 16, (float *)d, w);
}

/* Source whose rows are the panel's lines: op(X)[line r, depth p] = X[r][p]. A line's depth
 * pairs are already adjacent in the source, so each 32-step strip of a line converts to 16
 * pair-words in one register (a bf16 source holds them already: one load); the strips of the panel's lines
 * are then transposed (32-bit words) into the panel through a small buffer that stays in L1: with
 * 8x8 register transposes for groups of 8 lines of full strips, word by word for the rest (the
 * last lines of 12- and 14-row panels, edge panels, the last strip). */
static inline __attribute__((always_inline)) void pack_bf16_by_line_t(const void *X, long ldx, int p0, int kc,
                                                                      int r0, int len, int w, uint16_t *P,
                                                                      int src_bf16) {
    const int kp = (kc + 1) / 2;
    const long esz = src_bf16 ? 2 : 4;
    uint32_t tmp[64][16] __attribute__((aligned(64)));  /* w <= 64 */
    for (int pan = 0; pan * w < len; pan++) {
        uint32_t *D = (uint32_t *)(P + (long)pan * w * 2 * kp);
        int cnt = len - pan * w < w ? len - pan * w : w;
        const char *src = (const char *)X + ((long)(r0 + pan * w) * ldx + p0) * esz;
        for (int p = 0; p < kc; p += 32) {
            int rem = kc - p, pairs = rem >= 32 ? 16 : (rem + 1) / 2;
            __mmask16 m0 = mask16(rem), m1 = mask16(rem - 16);
            __mmask32 m32 = rem >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << rem) - 1u);
            for (int r = 0; r < cnt; r++) {
                const char *s = src + ((long)r * ldx + p) * esz;
                if (src_bf16) {
                    _mm512_store_si512(tmp[r], _mm512_maskz_loadu_epi16(m32, s));
                } else {
                    __m512 a = _mm512_maskz_loadu_ps(m0, s), b = _mm512_maskz_loadu_ps(m1, s + 64);
                    _mm512_store_si512(tmp[r], (__m512i)_mm512_cvtne2ps_pbh(b, a));
                }
            }
            uint32_t *d = D + (long)(p / 2) * w;
            int r8 = pairs == 16 ? cnt / 8 * 8 : 0;  /* lines done by register transposes */
            for (int g = 0; g < r8; g += 8) {
                transpose_8x8_words(&tmp[g][0], d + g, w);
                transpose_8x8_words(&tmp[g][8], d + 8L * w + g, w);
            }
            if (r8 < w)
                for (int t = 0; t < pairs; t++, d += w) {
                    int r = r8;
                    for (; r < cnt; r++) d[r] = tmp[r][t];
                    for (; r < w; r++) d[r] = 0;
                }
        }
    }
}

static void pack_bf16_by_depth(const float *X, long ldx, int p0, int kc, int c0, int len, int w, uint16_t *P) {
    pack_bf16_by_depth_t(X, ldx, p0, kc, c0, len, w, P, 0);
}
static void pack_bf16_by_line(const float *X, long ldx, int p0, int kc, int r0, int len, int w, uint16_t *P) {
    pack_bf16_by_line_t(X, ldx, p0, kc, r0, len, w, P, 0);
}
static void pack_h_by_depth(const uint16_t *X, long ldx, int p0, int kc, int c0, int len, int w, uint16_t *P) {
    pack_bf16_by_depth_t(X, ldx, p0, kc, c0, len, w, P, 1);
}
static void pack_h_by_line(const uint16_t *X, long ldx, int p0, int kc, int r0, int len, int w, uint16_t *P) {
    pack_bf16_by_line_t(X, ldx, p0, kc, r0, len, w, P, 1);
}
#pragma GCC pop_options

void gemm_pack_a_bf16(int transA, const float *A, long lda, int i0, int mc, int p0, int kc, int mr,
                      uint16_t *Ap) {
    if (transA) pack_bf16_by_depth(A, lda, p0, kc, i0, mc, mr, Ap);
    else pack_bf16_by_line(A, lda, p0, kc, i0, mc, mr, Ap);
}

void gemm_pack_b_bf16(int transB, const float *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                      uint16_t *Bp) {
    if (transB) pack_bf16_by_line(B, ldb, p0, kc, j0, nc, nr, Bp);
    else pack_bf16_by_depth(B, ldb, p0, kc, j0, nc, nr, Bp);
}

void gemm_pack_a_bf16_stored(int transA, const uint16_t *A, long lda, int i0, int mc, int p0, int kc, int mr,
                             uint16_t *Ap) {
    if (transA) pack_h_by_depth(A, lda, p0, kc, i0, mc, mr, Ap);
    else pack_h_by_line(A, lda, p0, kc, i0, mc, mr, Ap);
}

void gemm_pack_b_bf16_stored(int transB, const uint16_t *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                             uint16_t *Bp) {
    if (transB) pack_h_by_line(B, ldb, p0, kc, j0, nc, nr, Bp);
    else pack_h_by_depth(B, ldb, p0, kc, j0, nc, nr, Bp);
}

__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16")))
void gemm_cvt_bf16(const float *x, uint16_t *y, long n) {
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512(y + i, v);
    }
    for (; i < n; i++) {
        __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_setzero_ps(), _mm512_set1_ps(x[i]));
        y[i] = (uint16_t)_mm_extract_epi16(_mm512_castsi512_si128(v), 0);
    }
}
#else
void gemm_pack_a_bf16(int transA, const float *A, long lda, int i0, int mc, int p0, int kc, int mr,
                      uint16_t *Ap) {}
void gemm_pack_b_bf16(int transB, const float *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                      uint16_t *Bp) {}
void gemm_pack_a_bf16_stored(int transA, const uint16_t *A, long lda, int i0, int mc, int p0, int kc, int mr,
                             uint16_t *Ap) {}
void gemm_pack_b_bf16_stored(int transB, const uint16_t *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                             uint16_t *Bp) {}
void gemm_cvt_bf16(const float *x, uint16_t *y, long n) {}
#endif
