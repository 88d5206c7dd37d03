/* ops_linear_bf16.h — the bf16-activation form of op_linear / op_linear_add (nn/ops_linear_bf16.c),
 * called by them when x is bf16. Internal to the op layer. */
#ifndef ENDORET_OPS_LINEAR_BF16_H
#define ENDORET_OPS_LINEAR_BF16_H

#include <stdint.h>

#include "nn/tensor.h"

/* x2: x as a packed [M, K] bf16 matrix; w [N, K] fp32; bias [N] fp32 or NULL; res fp32 with y's
 * shape, or NULL. y has shape yshape (nd dims) and type y_dtype (DT_BF16 | DT_F32); fp32 with a
 * residual whatever y_dtype says. */
tensor *linear_bf16(tensor *x2, tensor *w, tensor *bias, tensor *res, int y_dtype, int nd, const int64_t *yshape);

/* Shared by both linear backwards (nn/ops_matmul.c). gb += the column sums of g (y's shape, fp32).
 * The residual's gradient += y's (fp32): it takes y's buffer when it has none yet (tape_give_grad),
 * so it comes last. */
void linear_bias_sums(tensor *gb, const tensor *y, const float *g);
void linear_residual_grad(struct tape_node *n, tensor *res, const tensor *y);

#endif
