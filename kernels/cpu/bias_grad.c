/* bias_grad.c — a linear layer's bias gradient: gb += column sums of g (rows x cols, fp32 or bf16),
 * and optionally g rounded to bf16 on the way (the fp32 gy of a residual linear, which its bf16
 * products read). The reference for kernels/cuda/bias.cu.
 * One pass over g: rows go in blocks of CPU_RED_RB, each block sums its rows in order into a float
 * partial row (a bf16 row widened span by span in an L1 buffer, not copied whole), the partials are
 * added per column in block order in double: cpu_reduce_strided_cols's blocks and order, so gb gets
 * the bits of cast + sum_to (which the linear layer's backward ran before this op), whatever the
 * thread count (tests/kernels/test_bias_grad.c). */
#include "kernels/cpu/cpu_kernels.h"

enum { SPAN = 1024 }; /* columns of a row handled at a time through the L1 buffer */

/* the block partial rows (one block: a row of doubles, as cpu_reduce_strided_cols) */
size_t cpu_bias_grad_workspace(int64_t rows, int64_t cols, int dt) {
    (void)dt;
    return cpu_reduce_strided_cols_workspace(rows, cols);
}

void cpu_bias_grad(int64_t rows, int64_t cols, int dt, const void *g, float *gb, uint16_t *g16, float *work) {
    if (rows <= 0 || cols <= 0 || (!gb && !g16)) return;
    const int64_t nblk = (rows + CPU_RED_RB - 1) / CPU_RED_RB;
    double *acc1 = (double *)(void *)work; /* one block: rows summed straight in double (as sum_to) */
    if (gb && nblk <= 1)
        for (int64_t c = 0; c < cols; c++) acc1[c] = 0.0;
    #pragma omp parallel for schedule(static) if (nblk > 1 && rows * cols > CPU_PAR_MIN)
    for (int64_t blk = 0; blk < nblk; blk++) {
        float wide[SPAN] __attribute__((aligned(64)));
        float *part = gb && nblk > 1 ? work + blk * cols : NULL;
        const int64_t r0 = blk * CPU_RED_RB, r1 = r0 + CPU_RED_RB < rows ? r0 + CPU_RED_RB : rows;
        for (int64_t r = r0; r < r1; r++)
            for (int64_t c0 = 0; c0 < cols; c0 += SPAN) {
                const int64_t len = cols - c0 < SPAN ? cols - c0 : SPAN, o = r * cols + c0;
                const float *v = (const float *)g + o;
                if (dt == ER_BF16) {
                    cpu_cast_span(len, ER_BF16, (const uint16_t *)g + o, ER_F32, wide, 0);
                    v = wide;
                }
                if (g16) cpu_cast_span(len, ER_F32, v, ER_BF16, g16 + o, 0);
                if (gb) cpu_colsum_add_span(part ? part + c0 : NULL, acc1 + c0, r == r0, len, v);
            }
    }
    if (gb) cpu_colsum_finish(nblk, cols, work, acc1, gb);
}
