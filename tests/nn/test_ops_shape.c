/* Shape ops: views (reshape, permute, transpose, slice, squeeze) share data; concat/split copy. */
#include <string.h>

#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

static tensor *f_permute(tensor **in, void *c) {
    int perm[4] = {2, 0, 3, 1};
    /* permute, then a non-linear elementwise op, so the gradient path goes through the view */
    return op_mul(op_permute(in[0], perm), op_permute(in[0], perm));
}

Test(nn_shape, permute_view_and_grad) {
    tensor *x = gc_rand(4, SHAPE(2, 3, 17, 1), 1, -1, 1);
    int perm[4] = {2, 0, 3, 1};
    tensor *p = op_permute(x, perm);
    cr_assert_eq(p->data, x->data, "permute is a view");
    cr_assert_eq(p->shape[0], 17);
    cr_assert_eq(p->shape[3], 3);
    tensor *c = op_contiguous(p);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int d = 0; d < 17; d++)
                cr_assert_eq(c->data[(d * 2 + a) * 3 + b], x->data[(a * 3 + b) * 17 + d]);
    tensor *in[1] = {x};
    cr_assert_eq(gradcheck("permute", f_permute, NULL, 1, in, gc_default()), 0);
    tensor_free(x);
}

static tensor *f_reshape_slice(tensor **in, void *c) {
    tensor *t = op_transpose(in[0], 0, 1);               /* [17, 3] strided */
    tensor *r = op_reshape(t, 3, SHAPE(-1, 3, 1));       /* forces a copy */
    tensor *s = op_slice(r, 0, 2, 15);                   /* [13, 3, 1] view */
    tensor *q = op_squeeze(s, 2);
    tensor *u = op_unsqueeze(q, 0);
    return op_mul(u, op_exp(u));
}

Test(nn_shape, reshape_slice_squeeze_grad) {
    tensor *x = gc_rand(2, SHAPE(3, 17), 2, -1, 1);
    tensor *in[1] = {x};
    tensor *y = f_reshape_slice(in, NULL);
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[1], 13);
    for (int i = 0; i < 13; i++)
        for (int j = 0; j < 3; j++) {
            float v = x->data[j * 17 + i + 2];
            cr_assert_float_eq(y->data[i * 3 + j], v * expf(v), 1e-5);
        }
    cr_assert_eq(gradcheck("reshape_slice", f_reshape_slice, NULL, 1, in, gc_default()), 0);
    cr_assert_null(op_reshape(x, 2, SHAPE(4, 13)));
    cr_assert_null(op_slice(x, 1, 5, 18));
    tensor_free(x);
}

static tensor *f_concat_split(tensor **in, void *c) {
    tensor *parts[3] = {in[0], in[1], in[2]};
    tensor *cat = op_concat(3, parts, 1); /* [3, 1+17+4, 2] */
    tensor *out[2];
    if (op_split(cat, 1, 2, SHAPE(10, 12), out)) return NULL;
    return op_concat(2, (tensor *[]){op_mul(out[1], out[1]), op_exp(out[0])}, 1);
}

Test(nn_shape, concat_split_forward_and_grad) {
    tensor *in[3] = {gc_rand(3, SHAPE(3, 1, 2), 3, -1, 1), gc_rand(3, SHAPE(3, 17, 2), 4, -1, 1),
                     gc_rand(3, SHAPE(3, 4, 2), 5, -1, 1)};
    tensor *cat = op_concat(3, in, 1);
    cr_assert_eq(cat->shape[1], 22);
    for (int a = 0; a < 3; a++)
        for (int j = 0; j < 22; j++)
            for (int b = 0; b < 2; b++) {
                float ref = j < 1 ? in[0]->data[(a * 1 + j) * 2 + b]
                          : j < 18 ? in[1]->data[(a * 17 + j - 1) * 2 + b]
                                   : in[2]->data[(a * 4 + j - 18) * 2 + b];
                cr_assert_eq(cat->data[(a * 22 + j) * 2 + b], ref);
            }
    cr_assert_eq(gradcheck("concat_split", f_concat_split, NULL, 3, in, gc_default()), 0);
    tensor *bad[2] = {in[0], tensor_new(3, SHAPE(2, 1, 2))};
    cr_assert_null(op_concat(2, bad, 1));
    tensor_free(bad[1]);
    gc_free(3, in);
}

static tensor *f_clone(tensor **in, void *c) { return op_mul(op_clone(in[0]), in[0]); }

Test(nn_shape, clone_copies_and_grad) {
    tensor *x = gc_rand(2, SHAPE(1, 197), 6, -1, 1);
    tensor *c = op_clone(x);
    cr_assert_neq(c->data, x->data);
    cr_assert_eq(memcmp(c->data, x->data, 197 * sizeof(float)), 0);
    tensor *in[1] = {x};
    cr_assert_eq(gradcheck("clone", f_clone, NULL, 1, in, gc_default()), 0);
    tensor_free(x);
}

static tensor *f_expand(tensor **in, void *c) {
    tensor *cls = op_expand(in[0], 3, SHAPE(3, 1, -1));             /* [1, 1, 4] -> [3, 1, 4] */
    tensor *seq = op_concat(2, (tensor *[]){cls, in[1]}, 1);       /* [3, 1 + 5, 4] */
    return op_mul(seq, op_expand(in[2], 3, SHAPE(3, 6, 4)));       /* [4] -> [3, 6, 4] */
}

Test(nn_shape, expand_view_and_grad) {
    tensor *in[3] = {gc_rand(3, SHAPE(1, 1, 4), 7, -1, 1), gc_rand(3, SHAPE(3, 5, 4), 8, -1, 1),
                     gc_rand(1, SHAPE(4), 9, -1, 1)};
    tensor *e = op_expand(in[0], 3, SHAPE(3, 2, 4));
    cr_assert_eq(e->data, in[0]->data, "expand is a view");
    float h[24];
    tensor_to_host(e, h);
    for (int i = 0; i < 24; i++) cr_assert_eq(h[i], in[0]->data[i % 4]);
    cr_assert_eq(gradcheck("expand", f_expand, NULL, 3, in, gc_default()), 0);
    cr_assert_null(op_expand(in[1], 3, SHAPE(3, 6, 4)));
    gc_free(3, in);
}
