/* Mixed requires-grad: for every multi-input op, freezing any one input must leave the other
 * inputs' gradients unchanged (and not crash), and the frozen input gets no gradient. */
#include <math.h>
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef tensor *(*fn3)(tensor **in);

static tensor *f_add(tensor **in) { return op_add(in[0], in[1]); }
static tensor *f_div(tensor **in) { return op_div(in[0], in[1]); }
static tensor *f_mm(tensor **in) { return op_matmul(in[0], in[1], 0, 1); }
static tensor *vec(tensor *t) { return op_reshape(t, 1, SHAPE(-1)); } /* [1, n] leaf -> [n] view */
static tensor *f_linear(tensor **in) { return op_linear(in[0], in[1], vec(in[2])); }
static tensor *f_ln(tensor **in) { return op_layernorm(in[0], vec(in[1]), vec(in[2]), 1e-5f); }
static tensor *f_attn(tensor **in) {
    return op_attention(op_reshape(in[0], 4, SHAPE(1, 2, 3, 4)), op_reshape(in[1], 4, SHAPE(1, 2, 3, 4)),
                        op_reshape(in[2], 4, SHAPE(1, 2, 3, 4)), NULL, MASK_NONE, 0);
}
static tensor *f_cat(tensor **in) { return op_concat(3, in, 0); }

static void check(const char *name, fn3 f, int n, const int64_t shapes[][2]) {
    tensor *in[3];
    for (int i = 0; i < n; i++) in[i] = gc_rand(2, shapes[i], 40 + i, 0.5f, 1.5f);
    tensor *y = f(in);
    cr_assert_not_null(y, "%s: %s", name, er_msg());
    int64_t m = tensor_numel(y);
    float *R = malloc(sizeof(float) * m);
    for (int64_t i = 0; i < m; i++) R[i] = (float)((i % 7) - 3);
    cr_assert_eq(backward_with(y, tensor_from_host(y->ndim, y->shape, R)), ER_OK);
    float *full[3];
    for (int i = 0; i < n; i++) {
        full[i] = malloc(sizeof(float) * tensor_numel(in[i]));
        memcpy(full[i], in[i]->grad->data, sizeof(float) * tensor_numel(in[i]));
    }
    nn_step_end();
    for (int frozen = 0; frozen < n; frozen++) {
        for (int i = 0; i < n; i++) {
            tensor_set_requires_grad(in[i], i != frozen);
            tensor_free(in[i]->grad);
            in[i]->grad = NULL;
        }
        y = f(in);
        cr_assert_eq(backward_with(y, tensor_from_host(y->ndim, y->shape, R)), ER_OK, "%s frozen %d: %s", name, frozen, er_msg());
        for (int i = 0; i < n; i++) {
            if (i == frozen) {
                cr_assert_null(in[i]->grad, "%s: frozen input %d got a gradient", name, i);
                continue;
            }
            for (int64_t e = 0; e < tensor_numel(in[i]); e++)
                cr_assert_float_eq(in[i]->grad->data[e], full[i][e], 1e-5, "%s frozen %d input %d", name, frozen, i);
        }
        nn_step_end();
    }
    for (int i = 0; i < n; i++) free(full[i]);
    free(R);
    gc_free(n, in);
}

Test(nn_frozen, each_input_frozen_in_turn) {
    check("add", f_add, 2, (const int64_t[][2]){{3, 5}, {1, 5}});
    check("div", f_div, 2, (const int64_t[][2]){{3, 5}, {3, 1}});
    check("matmul", f_mm, 2, (const int64_t[][2]){{3, 5}, {4, 5}});
    check("linear", f_linear, 3, (const int64_t[][2]){{3, 5}, {4, 5}, {1, 4}});
    check("layernorm", f_ln, 3, (const int64_t[][2]){{3, 5}, {1, 5}, {1, 5}});
    check("attention", f_attn, 3, (const int64_t[][2]){{6, 4}, {6, 4}, {6, 4}});
    check("concat", f_cat, 3, (const int64_t[][2]){{1, 4}, {3, 4}, {2, 4}});
}
