/* ops_reduce.c — sum / mean / max over one axis, and over everything. */
#include "nn/ops_util.h"

static void reduce_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x);
    if (!gx) return;
    BE(x)->reduce_backward((int)n->i[0], n->i[1], n->i[2], n->i[3], n->out->grad->data,
                           (const int32_t *)n->ctx, gx->data);
}

static tensor *reduce(const char *name, int op, tensor *x, int axis, int keepdim) {
    OPS_F32(name, x);
    if (!x) return NULL;
    int a = ops_axis(name, x, axis);
    if (a < 0) return NULL;
    if (op == RED_MAX && x->shape[a] == 0) {
        er_fail(ER_INPUT, "%s: empty axis %d", name, a);
        return NULL;
    }
    x = op_contiguous(x);
    int64_t outer, len, inner, sh[T_MAX_DIMS];
    ops_split3(x, a, &outer, &len, &inner);
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != a) sh[nd++] = x->shape[i];
        else if (keepdim) sh[nd++] = 1;
    }
    tensor *y = ops_new(x, nd, sh);
    int32_t *am = NULL;
    if (op == RED_MAX) am = (int32_t *)ops_scratch(x->device, outer * inner);
    BE(x)->reduce(op, outer, len, inner, x->data, y->data, am);
    tape_node *n = tape_record(name, reduce_backward, y, 1, &x);
    if (n) {
        n->i[0] = op;
        n->i[1] = outer;
        n->i[2] = len;
        n->i[3] = inner;
        n->ctx = am;
    }
    return y;
}

tensor *op_sum(tensor *x, int axis, int keepdim) { return reduce("sum", RED_SUM, x, axis, keepdim); }
tensor *op_mean(tensor *x, int axis, int keepdim) { return reduce("mean", RED_MEAN, x, axis, keepdim); }
tensor *op_max(tensor *x, int axis, int keepdim) { return reduce("max", RED_MAX, x, axis, keepdim); }

static tensor *reduce_all(const char *name, int op, tensor *x) {
    OPS_F32(name, x);
    if (!x) return NULL;
    tensor *flat = op_reshape(x, 1, SHAPE(tensor_numel(x)));
    return reduce(name, op, flat, 0, 0);
}

tensor *op_sum_all(tensor *x) { return reduce_all("sum_all", RED_SUM, x); }
tensor *op_mean_all(tensor *x) { return reduce_all("mean_all", RED_MEAN, x); }
