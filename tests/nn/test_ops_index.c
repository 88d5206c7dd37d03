/* index_select / gather / scatter: the MAE keep-and-restore round trip and gradients. */
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct { int kind; const int32_t *idx; int n; int64_t L; int axis; } ix_ctx;

static tensor *f_index(tensor **in, void *cv) {
    ix_ctx *c = cv;
    tensor *y = c->kind == 0 ? op_index_select(in[0], c->axis, c->idx, c->n)
              : c->kind == 1 ? op_gather(in[0], c->axis, c->idx, c->n)
                             : op_scatter(in[0], c->axis, c->idx, c->L);
    return op_mul(y, y);
}

Test(nn_index, index_select_forward_and_grad) {
    tensor *x = gc_rand(3, SHAPE(2, 17, 3), 1, -1, 1);
    int32_t idx[5] = {16, 0, 3, 3, 9}; /* a repeat: its gradient sums */
    tensor *y = op_index_select(x, 1, idx, 5);
    for (int o = 0; o < 2; o++)
        for (int j = 0; j < 5; j++)
            for (int c = 0; c < 3; c++) cr_assert_eq(y->data[(o * 5 + j) * 3 + c], x->data[(o * 17 + idx[j]) * 3 + c]);
    ix_ctx c = {0, idx, 5, 0, 1};
    tensor *in[1] = {x};
    cr_assert_eq(gradcheck("index_select", f_index, &c, 1, in, gc_default()), 0);
    int32_t badidx[1] = {17};
    cr_assert_null(op_index_select(x, 1, badidx, 1));
    tensor_free(x);
}

Test(nn_index, mae_keep_restore_round_trip_and_grad) {
    /* per-sample shuffles of L = 197 patches, keep 49, restore with mask tokens (zeros) */
    int B = 3, L = 197, K = 49, D = 4;
    int32_t *shuffle = malloc(sizeof(int32_t) * B * L), *keep = malloc(sizeof(int32_t) * B * K);
    rng_t r = rng_make(3, rng_stream(RNG_MASKING, 0, 0));
    for (int b = 0; b < B; b++) {
        int *perm = malloc(sizeof(int) * L);
        for (int i = 0; i < L; i++) perm[i] = i;
        rng_shuffle(&r, perm, L);
        for (int i = 0; i < L; i++) shuffle[b * L + i] = perm[i];
        for (int i = 0; i < K; i++) keep[b * K + i] = perm[i];
        free(perm);
    }
    tensor *x = gc_rand(3, SHAPE(B, L, D), 2, -1, 1);
    tensor *kept = op_gather(x, 1, keep, K);
    tensor *back = op_scatter(kept, 1, keep, L);
    for (int b = 0; b < B; b++) {
        char seen[197] = {0};
        for (int i = 0; i < K; i++) seen[keep[b * K + i]] = 1;
        for (int l = 0; l < L; l++)
            for (int d = 0; d < D; d++)
                cr_assert_eq(back->data[(b * L + l) * D + d], seen[l] ? x->data[(b * L + l) * D + d] : 0.0f);
    }
    /* full shuffle and its inverse restore the original order */
    int32_t *restore = malloc(sizeof(int32_t) * B * L);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < L; i++) restore[b * L + shuffle[b * L + i]] = i;
    tensor *sh = op_gather(x, 1, shuffle, L), *un = op_gather(sh, 1, restore, L);
    for (int64_t i = 0; i < tensor_numel(x); i++) cr_assert_eq(un->data[i], x->data[i]);
    tensor *in[1] = {x};
    ix_ctx c1 = {1, keep, K, 0, 1};
    cr_assert_eq(gradcheck("gather", f_index, &c1, 1, in, (gc_opts){1e-2, 1e-3, 5e-3, 150}), 0);
    tensor *small = gc_rand(3, SHAPE(B, K, D), 3, -1, 1);
    tensor *in2[1] = {small};
    ix_ctx c2 = {2, keep, K, L, 1};
    cr_assert_eq(gradcheck("scatter", f_index, &c2, 1, in2, gc_default()), 0);
    free(shuffle);
    free(keep);
    free(restore);
    tensor_free(x);
    tensor_free(small);
}
