/* op_bias_gelu: gradients against finite differences, the same bits as op_gelu(op_linear(x, w, b))
 * for the output and every gradient (what vit_block replaced with it), shapes checked. */
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static tensor *f_bias_gelu(tensor **in, void *ctx) {
    (void)ctx;
    return op_bias_gelu(in[0], in[1]);
}

Test(nn_bias_gelu, gradcheck_odd_shapes) {
    const int64_t shapes[][3] = {{1, 1, 5}, {2, 3, 7}, {3, 67, 9}};
    for (int s = 0; s < 3; s++) {
        tensor *in[2] = {gc_rand(3, shapes[s], 11 + s, -3, 3), gc_rand(1, &shapes[s][2], 21 + s, -1, 1)};
        cr_assert_eq(gradcheck("bias_gelu", f_bias_gelu, NULL, 2, in, gc_default()), 0, "shape %d", s);
        tensor_free(in[0]);
        tensor_free(in[1]);
    }
}

/* loss = sum(gelu(linear) * R) through the fused or the unfused path; output and gradients copied out */
static void run(int fused, tensor *x, tensor *w, tensor *b, const float *R, float *out, float *gx, float *gw, float *gb) {
    tensor *h = fused ? op_bias_gelu(op_linear(x, w, NULL), b) : op_gelu(op_linear(x, w, b));
    cr_assert_not_null(h, "%s", er_msg());
    tensor_to_host(h, out);
    tensor *loss = op_sum_all(op_mul(h, tensor_from_host(h->ndim, h->shape, R)));
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    tensor_to_host(x->grad, gx);
    tensor_to_host(w->grad, gw);
    tensor_to_host(b->grad, gb);
    nn_step_end();
    tensor_fill(x->grad, 0.0f);
    tensor_fill(w->grad, 0.0f);
    tensor_fill(b->grad, 0.0f);
}

Test(nn_bias_gelu, same_bits_as_linear_then_gelu) {
    const int64_t B = 3, T = 70, I = 24, O = 150; /* 210 rows: several 64-row blocks and a tail */
    tensor *x = gc_rand(3, SHAPE(B, T, I), 1, -2, 2), *w = gc_rand(2, SHAPE(O, I), 2, -0.5f, 0.5f), *b = gc_rand(1, SHAPE(O), 3, -1, 1);
    int64_t n = B * T * O;
    float *R = malloc(n * sizeof(float));
    for (int64_t i = 0; i < n; i++) R[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    float *o[2], *gx[2], *gw[2], *gb[2];
    for (int f = 0; f < 2; f++) {
        o[f] = malloc(n * sizeof(float));
        gx[f] = malloc(B * T * I * sizeof(float));
        gw[f] = malloc(O * I * sizeof(float));
        gb[f] = malloc(O * sizeof(float));
        run(f, x, w, b, R, o[f], gx[f], gw[f], gb[f]);
    }
    cr_expect(!memcmp(o[0], o[1], n * sizeof(float)), "output");
    cr_expect(!memcmp(gx[0], gx[1], B * T * I * sizeof(float)), "input gradient");
    cr_expect(!memcmp(gw[0], gw[1], O * I * sizeof(float)), "weight gradient");
    cr_expect(!memcmp(gb[0], gb[1], O * sizeof(float)), "bias gradient");
    for (int f = 0; f < 2; f++) { free(o[f]); free(gx[f]); free(gw[f]); free(gb[f]); }
    free(R);
    tensor_free(x); tensor_free(w); tensor_free(b);
}

Test(nn_bias_gelu, bad_shapes_are_one_message) {
    tensor *x = tensor_new(2, SHAPE(3, 4)), *b = tensor_new(1, SHAPE(5));
    cr_expect_null(op_bias_gelu(x, b));
    cr_expect(strstr(er_msg(), "bias_gelu") != NULL, "%s", er_msg());
    tensor_free(x);
    tensor_free(b);
}
