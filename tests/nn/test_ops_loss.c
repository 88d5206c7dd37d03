/* cross-entropy with label indices (and ignored rows) against a double reference; gradients. */
#include <math.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static tensor *f_ce(tensor **in, void *c) { return op_cross_entropy(in[0], c); }

Test(nn_loss, cross_entropy_value_and_grad) {
    const int64_t shapes[][2] = {{1, 1}, {3, 17}, {17, 3}, {2, 197}};
    for (int s = 0; s < 4; s++) {
        int64_t N = shapes[s][0], C = shapes[s][1];
        int32_t labels[17];
        for (int i = 0; i < N; i++) labels[i] = (i * 7 + 3) % C;
        if (N > 2) labels[1] = -1; /* ignored row */
        tensor *x = gc_rand(2, SHAPE(N, C), 30 + s, -4, 4);
        tensor *in[1] = {x};
        tensor *y = f_ce(in, labels);
        cr_assert_not_null(y, "%s", er_msg());
        double tot = 0;
        int nv = 0;
        for (int64_t r = 0; r < N; r++) {
            if (labels[r] < 0) continue;
            double m = -INFINITY, se = 0;
            for (int64_t j = 0; j < C; j++) m = fmax(m, x->data[r * C + j]);
            for (int64_t j = 0; j < C; j++) se += exp(x->data[r * C + j] - m);
            tot += m + log(se) - x->data[r * C + labels[r]];
            nv++;
        }
        cr_assert_float_eq(tensor_item(y), tot / nv, 1e-5);
        cr_assert_eq(gradcheck("cross_entropy", f_ce, labels, 1, in, gc_default()), 0, "shape %d", s);
        tensor_free(x);
        nn_step_end();
    }
    tensor *x = tensor_new(2, SHAPE(2, 3));
    cr_assert_null(op_cross_entropy(x, (int32_t[]){0, 3}));
    cr_assert_null(op_cross_entropy(x, (int32_t[]){-1, -1}));
    tensor_free(x);
}
