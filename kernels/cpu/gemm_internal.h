/* gemm_internal.h — what the sgemm driver (gemm.c), the packing routines (gemm_pack.c) and the
 * micro-kernels (gemm_ukr_*.c) share. Not part of the public API.
 *
 * Packed layouts (BLIS/GotoBLAS): an A micro-panel holds MR rows of op(A) for kc steps, stored
 * k-major (Ap[p*MR + i]); a B micro-panel holds NR columns of op(B), stored k-major
 * (Bp[p*NR + j]). Rows/columns past the matrix edge are packed as zeros, so a micro-kernel always
 * runs a full MR x NR tile and only its final store looks at the true tile size. */
#ifndef ENDORET_GEMM_INTERNAL_H
#define ENDORET_GEMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm.h"
#include "kernels/gemm_ex_args.h"

/* The sgemm precision of an op table `compute` value (GEMM_COMPUTE_*). */
static inline int sgemm_precision_of(int compute) {
    return compute == GEMM_COMPUTE_BF16 ? SGEMM_BF16 : SGEMM_FP32;
}

/* C[0:mr, 0:nr] = alpha * (Ap @ Bp) + beta * C  (beta == 0: C is only written, never read).
 * mr <= MR and nr <= NR give the valid part of the tile at the matrix edge. */
typedef void (*gemm_ukr_fn)(long kc, const float *Ap, const float *Bp, float *C, long ldc,
                            float alpha, float beta, int mr, int nr);

/* The bf16 form (SGEMM_BF16 on AVX512_BF16): kp depth pairs of bf16 panels in the
 * k-pair-interleaved layout of gemm_pack_bf16.c, fp32 accumulation, same C contract. */
typedef void (*gemm_ukr_bf16_fn)(long kp, const uint16_t *Ap, const uint16_t *Bp, float *C,
                                 long ldc, float alpha, float beta, int mr, int nr);

typedef struct {
    const char *name;   /* "avx512-14x32", ... */
    const char *isa;    /* "avx512", "avx512bf16", "avx2", "scalar": what sgemm_use_kernel() accepts */
    int mr, nr;         /* micro-tile */
    int mc, kc, nc;     /* cache blocking defaults (mc multiple of mr, nc multiple of nr) */
    gemm_ukr_fn fn;     /* fp32 panels (NULL for the bf16 kernels) */
    gemm_ukr_bf16_fn fn_bf16;  /* bf16 panels (only the avx512bf16 kernels) */
} gemm_kernel;

/* The compiled-in kernels of each instruction set, default first; *count = 0 when the set was not
 * compiled in (non-x86 or non-GCC-compatible builds). The caller checks CPU support. */
const gemm_kernel *gemm_kernels_avx512(int *count);
const gemm_kernel *gemm_kernels_avx2(int *count);
const gemm_kernel *gemm_kernels_scalar(int *count);
const gemm_kernel *gemm_kernels_avx512bf16(int *count);  /* fn_bf16 kernels */

/* Pack rows [i0, i0+mc) x depth [p0, p0+kc) of op(A) into ceil(mc/mr) micro-panels at Ap. */
void gemm_pack_a(int transA, const float *A, long lda, int i0, int mc, int p0, int kc, int mr,
                 float *Ap);
/* Pack depth [p0, p0+kc) x columns [j0, j0+nc) of op(B) into ceil(nc/nr) micro-panels at Bp. */
void gemm_pack_b(int transB, const float *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                 float *Bp);

/* The same blocks as bf16 k-pair-interleaved panels (AVX512_BF16 CPUs only): a panel of w lines
 * and kc depth steps takes w * 2 * ceil(kc/2) uint16, odd kc padded with a zero step. */
void gemm_pack_a_bf16(int transA, const float *A, long lda, int i0, int mc, int p0, int kc, int mr,
                      uint16_t *Ap);
void gemm_pack_b_bf16(int transB, const float *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                      uint16_t *Bp);
/* The same blocks from a source stored as bf16 (uint16 bits; gemm_ex's GEMM_BF16 operands):
 * *_bf16_stored into bf16 panels with no conversion (AVX512_BF16 CPUs only), *_widened into fp32
 * panels, widened exactly (any CPU). */
void gemm_pack_a_bf16_stored(int transA, const uint16_t *A, long lda, int i0, int mc, int p0, int kc, int mr,
                             uint16_t *Ap);
void gemm_pack_b_bf16_stored(int transB, const uint16_t *B, long ldb, int p0, int kc, int j0, int nc, int nr,
                             uint16_t *Bp);
void gemm_pack_a_widened(int transA, const uint16_t *A, long lda, int i0, int mc, int p0, int kc, int mr, float *Ap);
void gemm_pack_b_widened(int transB, const uint16_t *B, long ldb, int p0, int kc, int j0, int nc, int nr, float *Bp);

/* sgemm (kernels/gemm.h) over A and B stored as fp32 or bf16 (a_type, b_type: GEMM_F32 /
 * GEMM_BF16), C fp32; the driver of gemm_ex. A bf16 operand's packing reads its bits (above), so
 * the result equals sgemm's on its widened fp32 copy with the same precision, bit for bit. `pb`:
 * sgemm_with_packed_b's prepacked B (used only when B is fp32 and the pack is usable), or NULL. */
void sgemm_typed(int precision, int transA, int transB, int m, int n, int k, float alpha, const void *A, int a_type,
                 int lda, const void *B, int b_type, int ldb, const sgemm_packed_b *pb, float beta, float *C, int ldc);

/* n floats -> bf16 with the hardware conversion (vcvtne2ps2bf16); AVX512_BF16 CPUs only. */
void gemm_cvt_bf16(const float *x, uint16_t *y, long n);


/* Runtime CPU features (cpu_info.c): non-zero when the CPU and OS support them. */
int cpu_has_avx512(void);  /* AVX-512 F+VL+DQ+BW */
int cpu_has_avx2_fma(void);
int cpu_has_avx512_bf16(void);  /* AVX512_BF16 on top of cpu_has_avx512() */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* An 8x8 block of 32-bit words (floats, or bf16 pairs: bits unchanged), src rows of stride lds ->
 * dst rows of stride ldd: the unpack / shuffle / permute register transpose of both packers.
 * Callers are compiled for AVX2 or more. */
__attribute__((target("avx2"))) static inline void gemm_transpose_8x8(const float *src, long lds,
                                                                      float *dst, long ldd) {
    __m256 r0 = _mm256_loadu_ps(src + 0 * lds), r1 = _mm256_loadu_ps(src + 1 * lds);
    __m256 r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds);
    __m256 r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds);
    __m256 r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst + 0 * ldd, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + 1 * ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

#endif
