/* SwiGLU gate (nn/layers/swiglu.c): forward against a naive double loop, backward against finite
 * differences (tests/nn/gradcheck.h), and an odd width refused. */
#include <math.h>

#include "nn/layers/swiglu.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static tensor *f_swiglu(tensor **in, void *ctx) {
    (void)ctx;
    return swiglu_gate(in[0]);
}

Test(swiglu, forward_matches_a_naive_loop) {
    enum { B = 3, T = 5, H = 7 };
    tensor *h = gc_rand(3, SHAPE(B, T, 2 * H), 11, -4.0f, 4.0f);
    float out[B * T * H];
    NO_GRAD {
        tensor *y = swiglu_gate(h);
        cr_assert(y, "%s", er_msg());
        cr_assert_eq(y->ndim, 3);
        cr_assert_eq(y->shape[2], H);
        tensor_to_host(y, out);
    }
    nn_step_end();
    double md = 0;
    for (int r = 0; r < B * T; r++)
        for (int j = 0; j < H; j++) {
            double a = h->data[r * 2 * H + j], g = h->data[r * 2 * H + H + j];
            double want = a / (1.0 + exp(-a)) * g;
            md = fmax(md, fabs(out[r * H + j] - want));
        }
    cr_expect_leq(md, 2e-6, "silu(x1) * x2 differs from the double loop by %g", md);
    tensor_free(h);
}

Test(swiglu, backward_matches_finite_differences) {
    tensor *in[1] = {gc_rand(3, SHAPE(2, 3, 10), 12, -3.0f, 3.0f)};
    cr_assert_eq(gradcheck("swiglu", f_swiglu, NULL, 1, in, gc_default()), 0);
    gc_free(1, in);
}

Test(swiglu, odd_width_is_refused) {
    tensor *h = gc_rand(2, SHAPE(2, 5), 13, -1.0f, 1.0f);
    NO_GRAD { cr_expect_null(swiglu_gate(h)); }
    cr_expect(strstr(er_msg(), "odd"), "%s", er_msg());
    nn_step_end();
    tensor_free(h);
}
