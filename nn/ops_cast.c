/* ops_cast.c — op_cast: a tensor's storage type changed (fp32 <-> bf16), with its backward. */
#include "nn/ops_util.h"

static int dtype_known(int dtype) { return dtype == DT_F32 || dtype == DT_BF16; }

/* gx (x's dtype) (+)= cast(gy): the identity's gradient, rounded to x's dtype once per add */
static void cast_backward(tape_node *n) {
    int fresh;
    tensor *x = n->in[0], *y = n->out, *gx = grad_buf_fresh(x, &fresh);
    if (!gx) return;
    tensor *gy = y->grad; /* packed: y is packed, so is its gradient buffer (or a packed view of it) */
    BE(x)->cast(tensor_numel(y), gy->dtype, gy->raw, gx->dtype, gx->raw, !fresh);
}

tensor *op_cast(tensor *x, int dtype) {
    if (!x) return NULL;
    if (!dtype_known(dtype)) {
        er_fail(ER_INPUT, "cast: unknown dtype %d (DT_F32 or DT_BF16)", dtype);
        return NULL;
    }
    if (x->dtype == dtype) return x;
    x = op_contiguous(x);
    if (!x) return NULL;
    tensor *y = tensor_empty_dt(x->device, dtype, x->ndim, x->shape);
    if (!y) return NULL;
    BE(x)->cast(tensor_numel(x), x->dtype, x->raw, dtype, y->raw, 0);
    tape_record("cast", cast_backward, y, 1, &x);
    return y;
}
