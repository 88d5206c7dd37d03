/* cpu_kernels.h — the CPU kernels that fill backend_cpu (generated from kernels/ops.def, which
 * documents each one), plus shared helpers for strided iteration. Internal to kernels/cpu. */
#ifndef ENDORET_CPU_KERNELS_H
#define ENDORET_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#include <math.h>
#include <string.h>

/* exp(x) in a form GCC vectorises (glibc expf is a scalar call): x = n ln2 + r, |r| <= ln2 / 2,
 * exp(r) by a degree-6 Taylor polynomial (relative error < 2e-7), 2^n built in the exponent bits.
 * Returns 0 below -87.3 (so exp(-inf) = 0) and +inf above 88.7, like expf. */
static inline float exp_vec(float x) {
    float xc = x > 88.7f ? 88.7f : x;
    xc = xc < -87.3f ? -87.3f : xc;
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.3888889e-3f;
    p = p * r + 8.3333333e-3f;
    p = p * r + 4.1666667e-2f;
    p = p * r + 1.6666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t ni = (int32_t)n;
    if (ni > 127) { /* 2^128 is not a float: use 2^127 * 2 */
        ni = 127;
        p *= 2.0f;
    }
    /* unsigned: a NaN input makes ni INT_MIN and the exponent negative, and << of a negative int is
     * undefined (the result is NaN either way, from p); for normal inputs the bits are unchanged */
    uint32_t bits = (uint32_t)(ni + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.3f ? 0.0f : (x > 88.7f ? INFINITY : p * scale);
}

/* erf(x) piecewise: a = |x| is cut into 9 pieces of width 1/2 (k = floor(2a), a >= 4 -> k = 8,
 * where erf rounds to 1 in float). Piece 0: erf = a * P0(a^2) (relative accuracy near 0);
 * pieces 1-7: erf = Pk(a - (k/2 + 1/4)); degree 6 each, least-squares fits on Chebyshev nodes
 * (bench/fit_erf.py). Measured max error vs erf in double: 2.8 ulp of float on a dense sweep
 * (tests/nn/test_ops_elementwise.c). No division and no exp, so it vectorises well: the AVX-512
 * version (simd_avx512.c) picks each lane's coefficients with one permute per degree. */
#define ERF_DEG 6
static const float erf_poly[ERF_DEG + 1][16] = {
    {1.12837923f, 0.711155653f, 0.92290014f, 0.986671686f, 0.998537302f, 0.999899387f, 0.999995708f, 0.999999881f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f},
    {-0.376126379f, 0.642931521f, 0.236521229f, 0.0527748354f, 0.00714229979f, 0.000586294278f, 2.91936467e-05f, 8.81886649e-07f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    {0.112837911f, -0.482198149f, -0.295651734f, -0.092356205f, -0.0160701573f, -0.00161226746f, -9.48693341e-05f, -3.30607099e-06f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    {-0.0268661082f, 0.0267272182f, 0.167523086f, 0.0901776627f, 0.0217269789f, 0.00275820703f, 0.000195219283f, 7.91172806e-06f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    {0.00522326957f, 0.150675625f, -0.00613203505f, -0.048105523f, -0.0190882571f, -0.00325771049f, -0.000286169437f, -1.37854086e-05f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    {-0.00085065543f, -0.0512608625f, -0.0467769317f, 0.00596954022f, 0.0105811423f, 0.00282583339f, 0.000332615979f, 2.02052634e-05f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
    {0.000108199747f, -0.0265828297f, 0.0205977373f, 0.00904949475f, -0.00277956505f, -0.00166785053f, -0.000273758429f, -2.06924215e-05f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
};

/* m ? a : b for an all-ones / all-zeros mask m, as bit operations: GCC if-converts no branch with
 * floating-point arithmetic in it (it may trap), and sinks arithmetic into ?: arms, so loops over
 * erf_pw would not vectorise with plain ?: selects. */
static inline float erf_sel(uint32_t m, float a, float b) {
    uint32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    ia = (ia & m) | (ib & ~m);
    memcpy(&a, &ia, sizeof a);
    return a;
}

static inline float erf_pw(float x) {
    float a = fabsf(x);
    uint32_t ab;
    memcpy(&ab, &a, sizeof ab);
    float ac = erf_sel(0u - (uint32_t)(ab < 0x40800000u), a, 4.0f); /* min(a, 4); NaN -> 4 */
    int k = (int)(ac * 2.0f);
    uint32_t first = 0u - (uint32_t)(k == 0);
    float z = erf_sel(first, ac * ac, ac - (0.5f * (float)k + 0.25f));
    float r = erf_poly[6][k];
    r = r * z + erf_poly[5][k];
    r = r * z + erf_poly[4][k];
    r = r * z + erf_poly[3][k];
    r = r * z + erf_poly[2][k];
    r = r * z + erf_poly[1][k];
    r = r * z + erf_poly[0][k];
    r = erf_sel(first, r * ac, r);
    r = copysignf(r, x);                          /* erf is odd */
    return erf_sel(0u - (uint32_t)(x != x), x, r); /* NaN in, NaN out */
}

/* GELU, exact erf form (torch/timm default): the scalar references of gelu_*_avx512 / _avx2. */
static inline float gelu_f(float x) { return 0.5f * x * (1.0f + erf_pw(x * 0.70710678118654752f)); }
static inline float gelu_d(float x) {
    const float inv_sqrt2pi = 0.39894228040143268f;
    return 0.5f * (1.0f + erf_pw(x * 0.70710678118654752f)) + x * inv_sqrt2pi * exp_vec(-0.5f * x * x);
}

/* Below this many elements a kernel runs single-threaded (thread start-up costs more). */
#define CPU_PAR_MIN 32768

/* Drops size-1 dims and merges dims that are contiguous in all `nstr` stride arrays (in place).
 * Returns the new ndim (>= 1). */
int cpu_coalesce(int ndim, int64_t *shape, int64_t *const *strides, int nstr);
/* A strided copy's loop nest: x's and y's views over shape0, coalesced (cpu_coalesce) into `outer`
 * rows of `inner` elements with inner strides sx, sy; shape / xs / ys keep the coalesced outer dims
 * (nd of them with the inner one) for the row offsets. Shared by the fp32 and bf16 copies. */
typedef struct {
    int64_t shape[ER_MAX_DIMS + 1], xs[ER_MAX_DIMS + 1], ys[ER_MAX_DIMS + 1];
    int nd;
    int64_t inner, sx, sy, outer;
} cpu_copy_plan;
static inline void cpu_copy_plan_make(cpu_copy_plan *p, int ndim, const int64_t *shape0, const int64_t *xs0,
                                      const int64_t *ys0) {
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape0[i];
        p->xs[i] = xs0[i];
        p->ys[i] = ys0[i];
    }
    int64_t *st[2] = {p->xs, p->ys};
    p->nd = cpu_coalesce(ndim, p->shape, st, 2);
    p->inner = p->shape[p->nd - 1], p->sx = p->xs[p->nd - 1], p->sy = p->ys[p->nd - 1], p->outer = 1;
    for (int i = 0; i < p->nd - 1; i++) p->outer *= p->shape[i];
}

/* AVX-512 versions (simd_avx512.c), used when cpu_simd() says the CPU has AVX-512 F/VL/DQ/BW and
 * ENDORET_NO_SIMD is unset. Each has a scalar reference next to its caller; tests compare the two. */
int cpu_simd(void);
/* AVX2 + FMA (and ENDORET_NO_SIMD unset): GELU kernels for CPUs without AVX-512 */
int cpu_simd_avx2(void);
void erf_avx2(int64_t n, const float *x, float *y);
void gelu_forward_avx2(int64_t n, const float *x, float *y);
void gelu_backward_avx2(int64_t n, const float *x, const float *gy, float *gx); /* gx += */
void erf_avx512(int64_t n, const float *x, float *y); /* erf_pw on arrays (for tests) */
void gelu_forward_avx512(int64_t n, const float *x, float *y);
void gelu_backward_avx512(int64_t n, const float *x, const float *gy, float *gx); /* gx += */
/* In-place softmax of one row of n floats; returns the row's log-sum-exp (+inf and a zero row
 * when every entry is -inf). */
float softmax_row_avx512(float *s, int64_t n);
/* Attention's per-head products for a head width D % 16 == 0, D <= 64 (acc: add to C, else
 * overwrite). C [M x N] = alpha A B^T, A rows of length D (stride lda), Bt = B^T packed [D][ldb]
 * with ldb >= N rounded up to 16. */
void attn_gemm_abt_avx512(int M, int N, int D, float alpha, const float *A, int64_t lda,
                          const float *Bt, int64_t ldb, float *C, int64_t ldc, int acc);
/* Bt [D][ldt] = B^T of [N x D] rows of stride ldb; ldt a multiple of 16 >= N, padding zeroed. */
void pack_transposed_avx512(int N, int D, const float *B, int64_t ldb, float *Bt, int64_t ldt);
/* C [M x D] = alpha A B, A(i, j) = A[i ars + j acs], B [K x D] rows of stride ldb. */
void attn_gemm_ab_avx512(int M, int D, int K, float alpha, const float *A, int64_t ars, int64_t acs,
                         const float *B, int64_t ldb, float *C, int64_t ldc, int acc);

/* One (batch, head) of unmasked attention with the softmax / gradient steps fused into the
 * products (attention_avx512.c; D % 16 == 0, D <= 64). Row strides ld*; lse = the head's Tq row
 * log-sum-exps (written forward, read backward); gq/gk/gv += (NULL: not wanted); work holds
 * attn_fused_*_floats(Tq, Tk, D) floats. next: the rows of the head the calling thread runs next,
 * prefetched while this one runs (NULL: none). */
typedef struct {
    const float *q, *k, *v, *o, *go;
    const float *gq, *gk, *gv;
    int64_t ldq, ldk, ldv, ldo, ldgo, ldgq, ldgk, ldgv;
    int Tq, Tk;
} attn_next;
size_t attn_fused_forward_floats(int Tq, int Tk, int D);
size_t attn_fused_backward_floats(int Tq, int Tk, int D);
void attn_fused_forward_avx512(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq,
                               const float *k, int64_t ldk, const float *v, int64_t ldv, float *o,
                               int64_t ldo, float *lse, float *work, const attn_next *next);
void attn_fused_backward_avx512(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq,
                                const float *k, int64_t ldk, const float *v, int64_t ldv,
                                const float *o, int64_t ldo, const float *go, int64_t ldgo,
                                const float *lse, float *gq, int64_t ldgq, float *gk, int64_t ldgk,
                                float *gv, int64_t ldgv, float *work, const attn_next *next);

/* The same under SGEMM_BF16 on an AVX512_BF16 CPU (attention_bf16.c): products in bf16 with fp32
 * accumulation, as the unfused path's sgemm calls in that mode; work holds attn_bf16_*_floats. */
size_t attn_bf16_forward_floats(int Tq, int Tk, int D);
size_t attn_bf16_backward_floats(int Tq, int Tk, int D);
void attn_bf16_forward(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq, const float *k,
                       int64_t ldk, const float *v, int64_t ldv, float *o, int64_t ldo, float *lse, float *work,
                       const attn_next *next);
void attn_bf16_backward(int Tq, int Tk, int D, float scale, const float *q, int64_t ldq, const float *k,
                        int64_t ldk, const float *v, int64_t ldv, const float *o, int64_t ldo, const float *go,
                        int64_t ldgo, const float *lse, float *gq, int64_t ldgq, float *gk, int64_t ldgk, float *gv,
                        int64_t ldgv, float *work, const attn_next *next);
/* The same two on bf16 storage (every tensor as bf16 bits, lse fp32; `next` in attn_next's fp32 units,
 * see attention.c's stored_all):
 * bit for bit the fp32-storage kernels on widened copies, o rounded once, each gradient added as
 * round(old + (0 + sum)). The CPU's attention_bf16 / attention_bf16_backward (kernels/ops.def). */
void attn_bf16_forward_stored(int Tq, int Tk, int D, float scale, const uint16_t *q, int64_t ldq, const uint16_t *k,
                              int64_t ldk, const uint16_t *v, int64_t ldv, uint16_t *o, int64_t ldo, float *lse, float *work,
                              const attn_next *next);
void attn_bf16_backward_stored(int Tq, int Tk, int D, float scale, const uint16_t *q, int64_t ldq, const uint16_t *k,
                               int64_t ldk, const uint16_t *v, int64_t ldv, const uint16_t *o, int64_t ldo,
                               const uint16_t *go, int64_t ldgo, const float *lse, uint16_t *gq, int64_t ldgq, uint16_t *gk,
                               int64_t ldgk, uint16_t *gv, int64_t ldgv, float *work, const attn_next *next);

/* Max pooling of one plane's outputs q in [qa, qb) of every row, windows inside the columns, column
 * stride 1 or 2 (pool_avx512.c; pool.c's scalar loop is the reference and does the rest). */
void maxpool2d_interior_avx512(const pool2d_args *a, const float *xp, float *yp, int32_t *ap, int qa, int qb);

/* Rows per block of the column sums below: each block sums its rows in order into a float partial
 * row, the blocks' partials are added in block order in double (bias_gelu.c keeps the same blocks). */
#define CPU_RED_RB 64
/* out[c] = sum_r x[r * ld + c] for c < ncols; `work` holds
 * cpu_reduce_strided_cols_workspace(rows, ncols) floats, 8-byte aligned. */
size_t cpu_reduce_strided_cols_workspace(int64_t rows, int64_t ncols);
void cpu_reduce_strided_cols(int64_t rows, int64_t ld, int64_t ncols, const float *x, float *out,
                             float *work);

/* The same column sums fed span by span by a kernel that makes its rows itself (bias_gelu.c,
 * bias_grad.c): a span v[0:len] of row r of block blk at column c0 goes into the block's float
 * partial row (part = work + blk * ncols + c0; first: r is the block's first row) or, with one
 * block, into its double sums (acc1 + c0, zeroed before); cpu_colsum_finish then adds the sums
 * (block partials in block order, in double) to gb: the bits of cpu_reduce_strided_cols + add. */
void cpu_colsum_add_span(float *part, double *acc1, int first, int64_t len, const float *v);
void cpu_colsum_finish(int64_t nblk, int64_t ncols, const float *work, const double *acc1, float *gb);

/* The kernels of backend_cpu: cpu_<name> for every entry of kernels/ops.def. */
/* cpu_cast on the calling thread only (no parallel region): for kernels converting a row or a
 * span of their own inside their own parallel loop. Same bits as cpu_cast. */
void cpu_cast_span(int64_t n, int from, const void *x, int to, void *y, int accumulate);

#define ER_OP(ret, name, params, args) ret cpu_##name params;
#include "kernels/ops.def"
#undef ER_OP

#endif
