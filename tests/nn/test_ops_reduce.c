/* Reductions: sum / mean / max over each axis, keepdim, whole-tensor; forward + gradients. */
#include <math.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct { int op, axis, keep; } red_ctx;

static tensor *f_reduce(tensor **in, void *cv) {
    red_ctx *c = cv;
    switch (c->op) {
    case RED_SUM: return op_sum(in[0], c->axis, c->keep);
    case RED_MEAN: return op_mean(in[0], c->axis, c->keep);
    case RED_MAX: return op_max(in[0], c->axis, c->keep);
    case 3: return op_sum_all(in[0]);
    default: return op_mean_all(in[0]);
    }
}

Test(nn_reduce, axis_reductions_forward_and_grad) {
    const int64_t shapes[][3] = {{3, 17, 5}, {1, 3, 1}, {2, 197, 3}};
    for (int s = 0; s < 3; s++)
        for (int op = 0; op < 3; op++)
            for (int axis = -1; axis < 3; axis++) {
                tensor *x = gc_rand(3, shapes[s], 100 + s * 10 + op, -1, 1);
                if (op == RED_MAX) { /* distinct values 0.05 apart: no argmax flips within eps */
                    int64_t n = tensor_numel(x);
                    int *perm = malloc(sizeof(int) * n);
                    for (int64_t i = 0; i < n; i++) perm[i] = (int)i;
                    rng_t r = rng_make(s, 0);
                    rng_shuffle(&r, perm, (int)n);
                    for (int64_t i = 0; i < n; i++) x->data[i] = 0.05f * perm[i];
                    free(perm);
                }
                red_ctx c = {op, axis, axis == 1};
                tensor *in[1] = {x};
                tensor *y = f_reduce(in, &c);
                cr_assert_not_null(y, "%s", er_msg());
                int a = axis < 0 ? 2 : axis;
                int64_t O = 1, L = x->shape[a], I = 1;
                for (int i = 0; i < a; i++) O *= x->shape[i];
                for (int i = a + 1; i < 3; i++) I *= x->shape[i];
                cr_assert_eq(y->ndim, c.keep ? 3 : 2);
                for (int64_t o = 0; o < O; o++)
                    for (int64_t i = 0; i < I; i++) {
                        double acc = op == RED_MAX ? -INFINITY : 0;
                        for (int64_t j = 0; j < L; j++) {
                            double v = x->data[(o * L + j) * I + i];
                            acc = op == RED_MAX ? fmax(acc, v) : acc + v;
                        }
                        if (op == RED_MEAN) acc /= L;
                        cr_assert_float_eq(y->data[o * I + i], acc, 1e-5, "op %d axis %d", op, axis);
                    }
                cr_assert_eq(gradcheck("reduce", f_reduce, &c, 1, in, gc_default()), 0, "op %d axis %d shape %d", op, axis, s);
                tensor_free(x);
                nn_step_end();
            }
}

Test(nn_reduce, whole_tensor_and_double_accumulation) {
    /* 1e6 values of 0.1f: fp32 running sum drifts by ~1e-3 relative; double accumulation does not */
    int64_t n = 1000000;
    tensor *x = tensor_new(1, SHAPE(n));
    for (int64_t i = 0; i < n; i++) x->data[i] = 0.1f;
    float s = tensor_item(op_sum_all(x));
    cr_assert_float_eq(s, (double)0.1f * n, 1e-2, "sum %f", s);
    tensor_free(x);
    tensor *y = gc_rand(2, SHAPE(3, 17), 5, -1, 1);
    for (int op = 3; op < 5; op++) {
        red_ctx c = {op, 0, 0};
        tensor *in[1] = {y};
        cr_assert_eq(gradcheck("reduce_all", f_reduce, &c, 1, in, gc_default()), 0);
    }
    tensor_free(y);
}
