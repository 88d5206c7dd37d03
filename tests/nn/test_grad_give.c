/* A residual add's input takes the output's gradient buffer instead of a copy (tape_give_grad,
 * nn/autograd.h): the gradients stay right where the residual stream is shared, transposed, aliased
 * by a view, added to itself or is the tensor backward starts from, and the copy is gone. */
#include <math.h>
#include <string.h>

#include "kernels/profile.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

/* h = 2x; y = h + h*h; z = y W^T + b + y (linear_add with the residual its own input);
 * u = z + z^T (a transposed view of the same tensor); v = u + reshape(reshape(u)) (an alias view);
 * w = v + v (the same tensor twice); o = flat(w) + flat(0.5 h) with flat(w) an alias view of w
 * (its gradient must reach w's), and h's gradient built from four places; out = 1.5 o, so o is not
 * the root. */
static tensor *residual_graph(tensor **in, void *ctx) {
    (void)ctx;
    tensor *h = op_mul_scalar(in[0], 2.0f);
    tensor *y = op_add(h, op_mul(h, h));
    tensor *z = op_linear_add(y, in[1], in[2], y);
    tensor *u = op_add(z, op_transpose(z, 0, 1));
    tensor *v = op_add(u, op_reshape(op_reshape(u, 1, SHAPE(16)), 2, SHAPE(4, 4)));
    tensor *w = op_add(v, v);
    tensor *o = op_add(op_reshape(w, 1, SHAPE(16)), op_reshape(op_mul_scalar(h, 0.5f), 1, SHAPE(16)));
    return op_mul_scalar(o, 1.5f);
}

Test(grad_give, residual_graphs_match_finite_differences) {
    tensor *in[3] = {gc_rand(2, SHAPE(4, 4), 1, -1, 1), gc_rand(2, SHAPE(4, 4), 2, -0.5f, 0.5f),
                     gc_rand(1, SHAPE(4), 3, -0.5f, 0.5f)};
    cr_assert_eq(gradcheck("residual graph", residual_graph, NULL, 3, in, gc_default()), 0);
    gc_free(3, in);
}

/* The tensor backward starts from keeps its gradient (callers may read it): y = a + (q + 2a) seeded
 * with g, where a's other consumer adds 2g to a's gradient after y's node ran. */
Test(grad_give, the_root_gradient_is_not_given_away) {
    tensor *p = gc_rand(1, SHAPE(5), 4, -1, 1), *q = gc_rand(1, SHAPE(5), 5, -1, 1);
    tensor *a = op_mul_scalar(p, 1.0f), *y = op_add(a, op_add(q, op_mul_scalar(a, 2.0f)));
    const float g[5] = {1, -2, 3, -4, 5};
    cr_assert_eq(backward_with(y, tensor_from_host(1, SHAPE(5), g)), ER_OK, "%s", er_msg());
    float yg[5];
    tensor_to_host(y->grad, yg);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(yg[i], g[i], "root gradient changed at %d", i);
        cr_assert_eq(p->grad->data[i], 3.0f * g[i]);
        cr_assert_eq(q->grad->data[i], g[i]);
    }
    nn_step_end();
    tensor_free(p), tensor_free(q);
}

static int64_t calls(const char *name) {
    prof_entry e[64];
    int n = prof_entries(e, 64);
    int64_t c = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].name, name)) c += e[i].calls;
    return c;
}

/* The residual stream's gradient is not copied: in h + h*h and x W^T + b + h2 the residual input h
 * takes the output's buffer: one binary_grad.add call is left (h2's other side), where there were
 * three. */
Test(grad_give, residual_gradients_are_not_copied) {
    tensor *p = gc_rand(2, SHAPE(3, 6), 6, -1, 1), *w = gc_rand(2, SHAPE(6, 6), 7, -0.5f, 0.5f);
    prof_start();
    tensor *h = op_mul_scalar(p, 1.0f);
    tensor *h2 = op_add(h, op_mul_scalar(p, 0.0f));          /* b's side: a broadcast-free copy of gy */
    tensor *z = op_linear_add(op_mul_scalar(p, 0.0f), w, NULL, h2); /* x is a zero: z = h2 */
    tensor *out = op_mul_scalar(z, 3.0f);                    /* the root: z is not */
    const float ones[18] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_assert_eq(backward_with(out, tensor_from_host(2, SHAPE(3, 6), ones)), ER_OK, "%s", er_msg());
    prof_stop();
    cr_assert_eq(calls("binary_grad.add"), 1, "binary_grad.add: %lld calls, want 1 (h2's b side only)",
                 (long long)calls("binary_grad.add"));
    /* dL/dp = 3 through h; the two branches scaled by 0 add nothing */
    for (int i = 0; i < 18; i++) cr_assert(fabsf(p->grad->data[i] - 3.0f) < 1e-6f, "dp[%d] = %g", i, p->grad->data[i]);
    nn_step_end();
    tensor_free(p), tensor_free(w);
}
