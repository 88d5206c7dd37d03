/* ops_shape.c — reshape, permute/transpose, slice, (un)squeeze as views; contiguous, clone,
 * concat, split. Gradients are packed in the tensor's shape: a permute/slice backward adds into
 * the matching region of the input's gradient (the same view applied to the gradient buffer);
 * ops that keep the packed order (reshape, squeeze, clone) share the input's gradient buffer.
 * Every op here except expand takes fp32 and bf16 tensors alike (they only move elements; a bf16
 * tensor's gradient is bf16, accumulated in fp32 and rounded once per add: copy_strided_bf16). */
#include <string.h>

#include "nn/ops_util.h"

/* ---- contiguous / clone ---- */

/* clone / reshape / (un)squeeze keep the packed element order: gradients alias (autograd.h). */
#define copy_backward tape_alias_backward

tensor *op_clone(tensor *x) {
    if (!x) return NULL;
    tensor *y = ops_new_dt(x, x->ndim, x->shape);
    ops_copy_strided(x, x->ndim, x->shape, x->raw, x->stride, y->raw, y->stride, 0);
    tape_record("clone", copy_backward, y, 1, &x);
    return y;
}

tensor *op_contiguous(tensor *x) {
    if (!x) return NULL;
    return tensor_is_contiguous(x) ? x : op_clone(x);
}

/* ---- reshape family (packed views) ---- */

static tensor *packed_view(tensor *x, int ndim, const int64_t *shape, const char *name) {
    int64_t st[T_MAX_DIMS], acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= shape[i];
    }
    tensor *y = tensor_view(x, ndim, shape, st, 0);
    if (y) tape_record(name, copy_backward, y, 1, &x); /* same packed order: plain add */
    return y;
}

tensor *op_reshape(tensor *x, int ndim, const int64_t *shape) {
    if (!x) return NULL;
    if (ndim < 0 || ndim > T_MAX_DIMS) {
        er_fail(ER_INPUT, "reshape: %d dims (max %d)", ndim, T_MAX_DIMS);
        return NULL;
    }
    int64_t sh[T_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        sh[i] = shape[i];
        if (shape[i] == -1 && infer < 0) infer = i;
        else if (shape[i] < 0) {
            er_fail(ER_INPUT, "reshape: bad size %lld in dim %d", (long long)shape[i], i);
            return NULL;
        } else known *= shape[i];
    }
    int64_t n = tensor_numel(x);
    if (infer >= 0) sh[infer] = known ? n / known : 0;
    int64_t m = 1;
    for (int i = 0; i < ndim; i++) m *= sh[i];
    if (m != n) {
        char b[96];
        er_fail(ER_INPUT, "reshape: cannot view %s (%lld elements) with %lld elements",
                ops_shape(x, b), (long long)n, (long long)m);
        return NULL;
    }
    return packed_view(op_contiguous(x), ndim, sh, "reshape");
}

tensor *op_unsqueeze(tensor *x, int axis) {
    if (!x) return NULL;
    int a = axis < 0 ? axis + x->ndim + 1 : axis;
    if (a < 0 || a > x->ndim || x->ndim >= T_MAX_DIMS) {
        er_fail(ER_INPUT, "unsqueeze: axis %d invalid for %d dims", axis, x->ndim);
        return NULL;
    }
    int64_t sh[T_MAX_DIMS], st[T_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++) {
        if (i == a) {
            sh[i] = 1;
            st[i] = a < x->ndim ? x->stride[a] * x->shape[a] : 1;
        } else {
            sh[i] = x->shape[j];
            st[i] = x->stride[j];
            j++;
        }
    }
    tensor *y = tensor_view(x, x->ndim + 1, sh, st, 0);
    tape_record("unsqueeze", copy_backward, y, 1, &x);
    return y;
}

tensor *op_squeeze(tensor *x, int axis) {
    if (!x) return NULL;
    int a = ops_axis("squeeze", x, axis);
    if (a < 0) return NULL;
    if (x->shape[a] != 1) {
        er_fail(ER_INPUT, "squeeze: dim %d has size %lld, not 1", a, (long long)x->shape[a]);
        return NULL;
    }
    int64_t sh[T_MAX_DIMS], st[T_MAX_DIMS];
    for (int i = 0, j = 0; i < x->ndim; i++)
        if (i != a) {
            sh[j] = x->shape[i];
            st[j] = x->stride[i];
            j++;
        }
    tensor *y = tensor_view(x, x->ndim - 1, sh, st, 0);
    tape_record("squeeze", copy_backward, y, 1, &x);
    return y;
}

/* ---- permute ---- */

static void permute_backward(tape_node *n) {
    int fresh; /* a permutation covers every element: a buffer created now is written, not added to */
    tensor *x = n->in[0], *gx = grad_buf_fresh(x, &fresh), *y = n->out;
    if (!gx) return;
    int64_t st[T_MAX_DIMS];
    for (int i = 0; i < y->ndim; i++) st[i] = gx->stride[n->i[i]];
    ops_copy_strided(x, y->ndim, y->shape, y->grad->raw, y->grad->stride, gx->raw, st, !fresh);
}

tensor *op_permute(tensor *x, const int *perm) {
    if (!x) return NULL;
    int seen[T_MAX_DIMS] = {0};
    int64_t sh[T_MAX_DIMS], st[T_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        int p = perm[i];
        if (p < 0 || p >= x->ndim || seen[p]) {
            er_fail(ER_INPUT, "permute: not a permutation of %d dims (entry %d = %d)", x->ndim, i, p);
            return NULL;
        }
        seen[p] = 1;
        sh[i] = x->shape[p];
        st[i] = x->stride[p];
    }
    tensor *y = tensor_view(x, x->ndim, sh, st, 0);
    tape_node *n = tape_record("permute", permute_backward, y, 1, &x);
    if (n)
        for (int i = 0; i < x->ndim; i++) n->i[i] = perm[i];
    return y;
}

tensor *op_transpose(tensor *x, int a0, int a1) {
    if (!x) return NULL;
    int a = ops_axis("transpose", x, a0), b = ops_axis("transpose", x, a1);
    if (a < 0 || b < 0) return NULL;
    int perm[T_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return op_permute(x, perm);
}

/* ---- expand ---- */

static void expand_backward(tape_node *n) {
    int fresh; /* sum_to writes every element of x's gradient */
    tensor *x = n->in[0], *gx = grad_buf_fresh(x, &fresh), *y = n->out;
    if (!gx) return;
    int64_t xs[T_MAX_DIMS];
    for (int i = 0; i < y->ndim; i++) {
        int ix = i - (y->ndim - x->ndim);
        xs[i] = ix >= 0 ? x->shape[ix] : 1;
    }
    float *work = ops_scratch(x->device, (int64_t)BE(x)->sum_to_workspace(y->ndim, y->shape, xs));
    BE(x)->sum_to(y->ndim, y->shape, y->grad->data, xs, gx->data, !fresh, work);
}

tensor *op_expand(tensor *x, int ndim, const int64_t *shape) {
    OPS_F32("expand", x); /* its backward is a sum_to, fp32 only */
    if (!x) return NULL;
    if (ndim < x->ndim || ndim > T_MAX_DIMS) {
        er_fail(ER_INPUT, "expand: %d dims for a %d-dim tensor", ndim, x->ndim);
        return NULL;
    }
    int64_t sh[T_MAX_DIMS], st[T_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int ix = i - (ndim - x->ndim);
        int64_t d = ix >= 0 ? x->shape[ix] : 1, want = shape[i] == -1 && ix >= 0 ? d : shape[i];
        if (want < 0 || (d != 1 && d != want)) {
            char b[96];
            er_fail(ER_INPUT, "expand: cannot expand %s to size %lld in dim %d", ops_shape(x, b),
                    (long long)shape[i], i);
            return NULL;
        }
        sh[i] = want;
        st[i] = ix >= 0 && d == want ? x->stride[ix] : 0;
    }
    tensor *y = tensor_view(x, ndim, sh, st, 0);
    tape_record("expand", expand_backward, y, 1, &x);
    return y;
}

/* ---- slice ---- */

static void slice_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x), *y = n->out;
    if (!gx) return;
    int axis = (int)n->i[0];
    ops_copy_strided(x, y->ndim, y->shape, y->grad->raw, y->grad->stride, ops_at(gx, n->i[1] * gx->stride[axis]),
                     gx->stride, 1);
}

tensor *op_slice(tensor *x, int axis, int64_t start, int64_t end) {
    if (!x) return NULL;
    int a = ops_axis("slice", x, axis);
    if (a < 0) return NULL;
    if (start < 0 || end > x->shape[a] || start > end) {
        er_fail(ER_INPUT, "slice: [%lld, %lld) outside dim %d of size %lld", (long long)start,
                (long long)end, a, (long long)x->shape[a]);
        return NULL;
    }
    int64_t sh[T_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[a] = end - start;
    tensor *y = tensor_view(x, x->ndim, sh, x->stride, start * x->stride[a]);
    tape_node *n = tape_record("slice", slice_backward, y, 1, &x);
    if (n) {
        n->i[0] = a;
        n->i[1] = start;
    }
    return y;
}

int op_split(tensor *x, int axis, int n, const int64_t *sizes, tensor **out) {
    if (!x) return er_fail(ER_INPUT, "split: NULL input (%s)", er_msg());
    int a = ops_axis("split", x, axis);
    if (a < 0) return ER_INPUT;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += sizes[i];
    if (total != x->shape[a])
        return er_fail(ER_INPUT, "split: sizes add up to %lld, dim %d has %lld", (long long)total, a,
                       (long long)x->shape[a]);
    int64_t s = 0;
    for (int i = 0; i < n; i++) {
        out[i] = op_slice(x, a, s, s + sizes[i]);
        s += sizes[i];
    }
    return ER_OK;
}

/* ---- concat ---- */

typedef struct {
    int n, axis;
    tensor **xs;
    int64_t *starts;
} concat_ctx;

static void concat_backward(tape_node *nd) {
    concat_ctx *c = nd->ctx;
    tensor *y = nd->out, *gy = y->grad;
    for (int i = 0; i < c->n; i++) {
        tensor *x = c->xs[i], *gx = grad_buf(x);
        if (!gx) continue;
        ops_copy_strided(x, x->ndim, x->shape, ops_at(gy, c->starts[i] * gy->stride[c->axis]), gy->stride, gx->raw,
                         gx->stride, 1);
    }
}

tensor *op_concat(int n, tensor *const *xs, int axis) {
    if (n < 1) {
        er_fail(ER_INPUT, "concat: no tensors");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!xs[i]) return NULL;
    int a = ops_axis("concat", xs[0], axis);
    if (a < 0) return NULL;
    int64_t sh[T_MAX_DIMS];
    memcpy(sh, xs[0]->shape, sizeof sh);
    sh[a] = 0;
    for (int i = 0; i < n; i++) {
        const tensor *x = xs[i];
        int ok = x->ndim == xs[0]->ndim && x->device == xs[0]->device && x->dtype == xs[0]->dtype;
        for (int d = 0; ok && d < x->ndim; d++)
            if (d != a && x->shape[d] != xs[0]->shape[d]) ok = 0;
        if (!ok) {
            char b0[96], b1[96];
            er_fail(ER_INPUT, "concat: tensor %d (%s %s) is incompatible with tensor 0 (%s %s) along axis %d", i,
                    er_dtype_name(x->dtype), ops_shape(x, b1), er_dtype_name(xs[0]->dtype), ops_shape(xs[0], b0), a);
            return NULL;
        }
        sh[a] += x->shape[a];
    }
    tensor *y = ops_new_dt(xs[0], xs[0]->ndim, sh);
    arena *ar = arena_default(y->device);
    concat_ctx *c = arena_alloc_host(ar, sizeof *c);
    c->n = n;
    c->axis = a;
    c->xs = arena_alloc_host(ar, (size_t)n * sizeof(tensor *));
    c->starts = arena_alloc_host(ar, (size_t)n * sizeof(int64_t));
    int64_t s = 0;
    for (int i = 0; i < n; i++) {
        const tensor *x = xs[i];
        c->xs[i] = xs[i];
        c->starts[i] = s;
        ops_copy_strided(x, x->ndim, x->shape, x->raw, x->stride, ops_at(y, s * y->stride[a]), y->stride, 0);
        s += x->shape[a];
    }
    tape_node *nd = tape_record("concat", concat_backward, y, n, xs);
    if (nd) nd->ctx = c;
    return y;
}
