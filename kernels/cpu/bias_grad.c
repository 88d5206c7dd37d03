/* bias_grad.c — a linear layer's bias gradient: gb += column sums of g (rows x cols, fp32 or bf16),
 * and optionally g rounded to bf16 on the way (the fp32 gy of a residual linear, which its bf16
 * products read). The reference for kernels/cuda/bias.cu: a bf16 g is widened and summed exactly
 * as sum_to's column path sums an fp32 one (cpu_reduce_strided_cols), so the result is the bits of
 * cast + sum_to, which the linear layer's backward ran before this op existed. */
#include "kernels/cpu/cpu_kernels.h"

/* a widened copy of a bf16 g (rows x cols, 64-byte rounded), then sum_to's scratch */
static size_t widened_floats(int64_t rows, int64_t cols, int dt) {
    return dt == ER_BF16 ? ((size_t)(rows * cols) + 15) / 16 * 16 : 0;
}

size_t cpu_bias_grad_workspace(int64_t rows, int64_t cols, int dt) {
    const int64_t xs[2] = {rows, cols}, ys[2] = {1, cols};
    return widened_floats(rows, cols, dt) + cpu_sum_to_workspace(2, xs, ys);
}

void cpu_bias_grad(int64_t rows, int64_t cols, int dt, const void *g, float *gb, uint16_t *g16, float *work) {
    if (rows <= 0 || cols <= 0) return;
    if (g16) cpu_cast(rows * cols, dt, g, ER_BF16, g16, 0);
    if (!gb) return;
    const float *gf = (const float *)g;
    if (dt == ER_BF16) {
        cpu_cast(rows * cols, ER_BF16, g, ER_F32, work, 0);
        gf = work;
    }
    const int64_t xs[2] = {rows, cols}, ys[2] = {1, cols};
    cpu_sum_to(2, xs, gf, ys, gb, 1, work + widened_floats(rows, cols, dt));
}
