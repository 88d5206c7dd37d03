/* ops_norm.c — layernorm, softmax / log-softmax and L2 normalisation (last axis; another axis is
 * moved last with a transpose, which autograd differentiates like any op). */
#include "nn/ops_util.h"

/* ---- layernorm ---- */

static void layernorm_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    tensor *gx = grad_buf(x), *gw = grad_buf(w), *gb = grad_buf(b);
    int64_t C = x->shape[x->ndim - 1], R = C ? tensor_numel(x) / C : 0;
    float *mean = n->ctx, *rstd = mean + R;
    arena_mark m = ops_mark(x->device);
    float *work = ops_scratch(x->device, (int64_t)BE(x)->layernorm_backward_workspace(R, C));
    BE(x)->layernorm_backward(R, C, x->dtype, x->raw, w ? w->data : NULL, mean, rstd, y->dtype, y->grad->raw,
                              gx ? gx->raw : NULL, gw ? gw->data : NULL, gb ? gb->data : NULL, work);
    ops_release(x->device, m);
}

tensor *op_layernorm_to(tensor *x, tensor *w, tensor *b, float eps, int dtype) {
    OPS_F32("layernorm", w, b);
    if (!x) return NULL;
    int64_t C = x->ndim ? x->shape[x->ndim - 1] : 0;
    if (x->ndim < 1 || (w && (w->ndim != 1 || w->shape[0] != C)) || (b && (b->ndim != 1 || b->shape[0] != C))) {
        char s[96];
        er_fail(ER_INPUT, "layernorm: input %s needs weight/bias of shape [%lld]", ops_shape(x, s), (long long)C);
        return NULL;
    }
    if (dtype != DT_F32 && dtype != DT_BF16) {
        er_fail(ER_INPUT, "layernorm: output dtype %d is not fp32 or bf16", dtype);
        return NULL;
    }
    if ((x->dtype != DT_F32 || dtype != DT_F32) && C > ER_LAYERNORM_BF16_MAX_COLS) {
        er_fail(ER_INPUT, "layernorm: rows of %lld with a bf16 input or output (at most %d)", (long long)C,
                ER_LAYERNORM_BF16_MAX_COLS);
        return NULL;
    }
    x = op_contiguous(x);
    if (w) w = op_contiguous(w);
    if (b) b = op_contiguous(b);
    int64_t R = C ? tensor_numel(x) / C : 0;
    tensor *y = tensor_empty_dt(x->device, dtype, x->ndim, x->shape);
    float *stats = ops_scratch(x->device, 2 * R);
    BE(x)->layernorm(R, C, x->dtype, x->raw, w ? w->data : NULL, b ? b->data : NULL, eps, dtype, y->raw, stats,
                     stats + R);
    tensor *in[3] = {x, w, b};
    tape_node *n = tape_record("layernorm", layernorm_backward, y, 3, in);
    if (n) n->ctx = stats;
    return y;
}

tensor *op_layernorm(tensor *x, tensor *w, tensor *b, float eps) { return op_layernorm_to(x, w, b, eps, x ? x->dtype : DT_F32); }

/* ---- softmax ---- */

static void softmax_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x), *y = n->out;
    if (!gx) return;
    int64_t C = x->shape[x->ndim - 1], R = C ? tensor_numel(x) / C : 0;
    BE(x)->softmax_backward(R, C, y->data, y->grad->data, gx->data, (int)n->i[0]);
}

static tensor *softmax(tensor *x, int axis, int log) {
    OPS_F32(log ? "log_softmax" : "softmax", x);
    if (!x) return NULL;
    int a = ops_axis(log ? "log_softmax" : "softmax", x, axis);
    if (a < 0) return NULL;
    if (a != x->ndim - 1)
        return op_transpose(softmax(op_contiguous(op_transpose(x, a, -1)), -1, log), a, -1);
    x = op_contiguous(x);
    int64_t C = x->shape[x->ndim - 1], R = C ? tensor_numel(x) / C : 0;
    tensor *y = ops_new(x, x->ndim, x->shape);
    BE(x)->softmax(R, C, x->data, y->data, log);
    tape_node *n = tape_record(log ? "log_softmax" : "softmax", softmax_backward, y, 1, &x);
    if (n) n->i[0] = log;
    return y;
}

tensor *op_softmax(tensor *x, int axis) { return softmax(x, axis, 0); }
tensor *op_log_softmax(tensor *x, int axis) { return softmax(x, axis, 1); }

/* ---- L2 normalisation ---- */

static void l2_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x), *y = n->out;
    if (!gx) return;
    int64_t C = x->shape[x->ndim - 1], R = C ? tensor_numel(x) / C : 0;
    BE(x)->l2norm_backward(R, C, y->data, n->ctx, y->grad->data, gx->data, n->f[0]);
}

tensor *op_l2_normalize(tensor *x, int axis, float eps) {
    OPS_F32("l2_normalize", x);
    if (!x) return NULL;
    int a = ops_axis("l2_normalize", x, axis);
    if (a < 0) return NULL;
    if (a != x->ndim - 1)
        return op_transpose(op_l2_normalize(op_contiguous(op_transpose(x, a, -1)), -1, eps), a, -1);
    x = op_contiguous(x);
    int64_t C = x->shape[x->ndim - 1], R = C ? tensor_numel(x) / C : 0;
    tensor *y = ops_new(x, x->ndim, x->shape);
    float *norm = ops_scratch(x->device, R);
    BE(x)->l2norm(R, C, x->data, y->data, norm, eps);
    tape_node *n = tape_record("l2_normalize", l2_backward, y, 1, &x);
    if (n) {
        n->ctx = norm;
        n->f[0] = eps;
    }
    return y;
}
