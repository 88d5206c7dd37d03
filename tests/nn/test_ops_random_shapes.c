/* Randomised shape sweep: ops whose behaviour depends on the shape (broadcasting, axis choice,
 * permutation, views of views) under random shapes with sizes from {1, 2, 3, 5, 17}; gradients
 * against finite differences, forward through composite identities that must hold exactly. */
#include <math.h>
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static const int64_t sizes[] = {1, 2, 3, 5, 17};

static int random_shape(rng_t *r, int64_t *shape, int maxdim, int64_t maxnumel) {
    int nd;
    int64_t n;
    do {
        nd = 1 + (int)rng_below(r, (uint32_t)maxdim);
        n = 1;
        for (int i = 0; i < nd; i++) n *= shape[i] = sizes[rng_below(r, 5)];
    } while (n > maxnumel);
    return nd;
}

typedef struct { int op; int axis; int perm[4]; } rs_ctx;

static tensor *f_bin(tensor **in, void *cv) {
    rs_ctx *c = cv;
    /* both operands go through a permute view first, so broadcasting meets strided inputs */
    tensor *a = op_permute(in[0], c->perm);
    return c->op == 0 ? op_mul(a, in[1]) : c->op == 1 ? op_div(a, in[1]) : op_sub(a, in[1]);
}

Test(nn_random_shapes, broadcast_binary_over_permuted_views) {
    rng_t r = rng_make(2024, 0);
    for (int trial = 0; trial < 40; trial++) {
        int64_t sa[4], sb[4];
        int nd = random_shape(&r, sa, 4, 400);
        rs_ctx c = {(int)rng_below(&r, 3), 0, {0, 1, 2, 3}};
        int perm[4] = {0, 1, 2, 3};
        for (int i = nd - 1; i > 0; i--) { /* random permutation */
            int j = (int)rng_below(&r, (uint32_t)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        memcpy(c.perm, perm, sizeof perm);
        int64_t sp[4]; /* shape after the permute */
        for (int i = 0; i < nd; i++) sp[i] = sa[perm[i]];
        /* b: a suffix of the permuted shape with random dims set to 1 */
        int ndb = 1 + (int)rng_below(&r, (uint32_t)nd);
        for (int i = 0; i < ndb; i++) sb[i] = rng_below(&r, 2) ? 1 : sp[nd - ndb + i];
        tensor *in[2] = {gc_rand(nd, sa, 10 + trial, -1, 1), gc_rand(ndb, sb, 50 + trial, 0.5f, 1.5f)};
        cr_assert_eq(gradcheck("random_binary", f_bin, &c, 2, in, gc_default()), 0, "trial %d op %d", trial, c.op);
        gc_free(2, in);
        nn_step_end();
    }
}

static tensor *f_red(tensor **in, void *cv) {
    rs_ctx *c = cv;
    tensor *x = op_transpose(in[0], 0, -1);
    switch (c->op) {
    case 0: return op_mul(op_sum(x, c->axis, 1), op_mean(x, c->axis, 1));
    case 1: return op_softmax(x, c->axis);
    case 2: return op_log_softmax(x, c->axis);
    default: return op_layernorm(op_exp(x), NULL, NULL, 1e-5f);
    }
}

Test(nn_random_shapes, reductions_and_softmax_any_axis) {
    rng_t r = rng_make(77, 0);
    for (int trial = 0; trial < 40; trial++) {
        int64_t s[4];
        int nd = random_shape(&r, s, 4, 300);
        rs_ctx c = {(int)rng_below(&r, 4), (int)rng_below(&r, (uint32_t)nd) - (int)rng_below(&r, 2) * nd, {0}};
        if (c.op == 3 && s[0] < 2) s[0] = 3; /* layernorm over the (transposed) last axis needs >= 2 */
        tensor *in[1] = {gc_rand(nd, s, 100 + trial, -1, 1)};
        gc_opts o = gc_default();
        o.max_elems = 80;
        if (c.op == 3) o.eps = 2e-3; /* LN of 3 values: small sigma, large 3rd derivative: smaller step */
        char sh[96];
        cr_assert_eq(gradcheck("random_reduce", f_red, &c, 1, in, o), 0, "trial %d op %d axis %d shape %s", trial, c.op, c.axis, tensor_shape_str(in[0], sh, 96));
        gc_free(1, in);
        nn_step_end();
    }
}

Test(nn_random_shapes, reshape_permute_round_trip_is_identity) {
    rng_t r = rng_make(5, 0);
    for (int trial = 0; trial < 50; trial++) {
        int64_t s[5];
        int nd = random_shape(&r, s, 5, 5000);
        tensor *x = gc_rand(nd, s, trial, -1, 1);
        int perm[5] = {0, 1, 2, 3, 4}, inv[5];
        for (int i = nd - 1; i > 0; i--) {
            int j = (int)rng_below(&r, (uint32_t)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < nd; i++) inv[perm[i]] = i;
        tensor *p = op_contiguous(op_permute(x, perm));
        tensor *flat = op_reshape(p, 1, SHAPE(-1));
        int64_t ps[5];
        for (int i = 0; i < nd; i++) ps[i] = p->shape[i];
        tensor *back = op_permute(op_reshape(flat, nd, ps), inv);
        float *h = malloc(sizeof(float) * tensor_numel(x));
        tensor_to_host(back, h);
        cr_assert_eq(memcmp(h, x->data, sizeof(float) * tensor_numel(x)), 0, "trial %d", trial);
        free(h);
        tensor_free(x);
        nn_step_end();
    }
}
