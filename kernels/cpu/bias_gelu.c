/* bias_gelu.c — a linear layer's bias and the exact-erf GELU in one pass over the activation.
 * Unfused, the bias add reads and writes the matmul output, GELU reads it again; the backward
 * zero-fills the gradient, adds gelu' * gy into it (read + write) and reads it once more for the
 * bias's column sums. Here x + b lives only in an L1 buffer, the gradient is written once and the
 * bias sums are taken from the same buffer.
 * The per-element arithmetic is the GELU kernels' own (gelu_*_avx512 / _avx2, or gelu_f / gelu_d:
 * the path cpu_unary picks on this CPU) and the column sums keep cpu_reduce_strided_cols's blocks
 * and order, so a fresh gradient is bit-identical to bias add + GELU + sum_to, whatever the
 * thread count (tests/kernels/test_bias_gelu.c).
 * bf16 storage (dt = ER_BF16 for x, y, gy, gx; b and gb stay fp32): x and gy are widened into the
 * same L1 buffers and the fp32 results rounded once on the way out (cpu_cast_span), so a bf16 call
 * gives the fp32 call's result on the widened inputs, rounded, and the same bias sums
 * (tests/kernels/test_norm_bf16.c). */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

enum { SPAN = 1024 }; /* columns of a row handled at a time through the L1 buffers */

/* y[0:n] = gelu(z) */
static void gelu_span(int64_t n, const float *z, float *y) {
    if (cpu_simd()) gelu_forward_avx512(n, z, y);
    else if (cpu_simd_avx2()) gelu_forward_avx2(n, z, y);
    else
        for (int64_t i = 0; i < n; i++) y[i] = gelu_f(z[i]);
}

/* t[0:n] += gelu'(z) * gy */
static void gelu_grad_span(int64_t n, const float *z, const float *gy, float *t) {
    if (cpu_simd()) gelu_backward_avx512(n, z, gy, t);
    else if (cpu_simd_avx2()) gelu_backward_avx2(n, z, gy, t);
    else
        for (int64_t i = 0; i < n; i++) t[i] += gy[i] * gelu_d(z[i]);
}

void cpu_bias_gelu(int64_t rows, int64_t cols, int dt, const void *x, const float *b, void *y) {
    #pragma omp parallel for schedule(static) if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        float z[SPAN] __attribute__((aligned(64))), yb[SPAN] __attribute__((aligned(64)));
        for (int64_t c0 = 0; c0 < cols; c0 += SPAN) {
            int64_t len = cols - c0 < SPAN ? cols - c0 : SPAN, o = r * cols + c0;
            const float *br = b + c0;
            if (dt == ER_BF16) {
                cpu_cast_span(len, ER_BF16, (const uint16_t *)x + o, ER_F32, z, 0);
                for (int64_t i = 0; i < len; i++) z[i] += br[i];
                gelu_span(len, z, yb);
                cpu_cast_span(len, ER_F32, yb, ER_BF16, (uint16_t *)y + o, 0);
            } else {
                const float *xr = (const float *)x + o;
                for (int64_t i = 0; i < len; i++) z[i] = xr[i] + br[i];
                gelu_span(len, z, (float *)y + o);
            }
        }
    }
}

/* The column sums' scratch: the float partial rows of the row blocks (or, one block, a row of
 * doubles), as cpu_sum_to's column path takes. */
size_t cpu_bias_gelu_backward_workspace(int64_t rows, int64_t cols) {
    return cpu_reduce_strided_cols_workspace(rows, cols);
}

void cpu_bias_gelu_backward(int64_t rows, int64_t cols, int dt, const void *x, const float *b, const void *gy,
                            void *gx, float *gb, int accumulate, float *work) {
    if (rows <= 0 || cols <= 0) return;
    const int64_t nblk = (rows + CPU_RED_RB - 1) / CPU_RED_RB;
    const int bf = dt == ER_BF16;
    double *acc1 = (double *)(void *)work; /* one block: rows summed straight in double (as sum_to) */
    if (gb && nblk <= 1)
        for (int64_t c = 0; c < cols; c++) acc1[c] = 0.0;
    #pragma omp parallel for schedule(static) if (nblk > 1 && rows * cols > CPU_PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        float z[SPAN] __attribute__((aligned(64))), t[SPAN] __attribute__((aligned(64)));
        float g16[SPAN] __attribute__((aligned(64)));
        float *part = gb && nblk > 1 ? work + blk * cols : NULL;
        int64_t r0 = blk * CPU_RED_RB, r1 = r0 + CPU_RED_RB < rows ? r0 + CPU_RED_RB : rows;
        for (int64_t r = r0; r < r1; r++)
            for (int64_t c0 = 0; c0 < cols; c0 += SPAN) {
                int64_t len = cols - c0 < SPAN ? cols - c0 : SPAN, o = r * cols + c0;
                const float *gyr = (const float *)gy + o;
                if (bf) {
                    cpu_cast_span(len, ER_BF16, (const uint16_t *)x + o, ER_F32, z, 0);
                    cpu_cast_span(len, ER_BF16, (const uint16_t *)gy + o, ER_F32, g16, 0);
                    gyr = g16;
                    for (int64_t i = 0; i < len; i++) {
                        z[i] += b[c0 + i];
                        t[i] = 0.0f;
                    }
                } else {
                    const float *xr = (const float *)x + o;
                    for (int64_t i = 0; i < len; i++) {
                        z[i] = xr[i] + b[c0 + i];
                        t[i] = 0.0f;
                    }
                }
                gelu_grad_span(len, z, gyr, t); /* t = 0 + gelu'(z) gy: a zero-filled gx's value */
                if (bf) {
                    cpu_cast_span(len, ER_F32, t, ER_BF16, (uint16_t *)gx + o, accumulate);
                } else if (accumulate) {
                    float *g = (float *)gx + o;
                    for (int64_t i = 0; i < len; i++) g[i] += t[i];
                } else {
                    memcpy((float *)gx + o, t, (size_t)len * sizeof(float));
                }
                if (gb) cpu_colsum_add_span(part ? part + c0 : NULL, acc1 + c0, r == r0, len, t);
            }
    }
    if (gb) cpu_colsum_finish(nblk, cols, work, acc1, gb);
}
