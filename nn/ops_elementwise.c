/* ops_elementwise.c — broadcasting binary ops, unary maps, scalar ops and dropout. */
#include <string.h>

#include "nn/ops_util.h"

/* ---- broadcasting binary ops ---- */

/* Output shape of numpy broadcasting and each operand's strides over it (0 on broadcast dims). */
static int broadcast(const char *op, const tensor *a, const tensor *b, int *ndim, int64_t *shape,
                     int64_t *as, int64_t *bs) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char s0[96], s1[96];
            return er_fail(ER_INPUT, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op,
                           ops_shape(a, s0), ops_shape(b, s1), i, (long long)da, (long long)db);
        }
        shape[i] = da > db ? da : db;
        if (da == 0 || db == 0) shape[i] = 0;
        as[i] = ia >= 0 && da != 1 ? a->stride[ia] : 0;
        bs[i] = ib >= 0 && db != 1 ? b->stride[ib] : 0;
    }
    *ndim = nd;
    return ER_OK;
}

static void binary_backward(tape_node *n) {
    tensor *a = n->in[0], *b = n->in[1], *y = n->out;
    int op = (int)n->i[0], nd = y->ndim;
    int64_t shape[T_MAX_DIMS], as[T_MAX_DIMS], bs[T_MAX_DIMS];
    broadcast("", a, b, &nd, shape, as, bs);
    /* a + b with a the size of y (a residual add): a's gradient is gy itself, so a may take y's buffer
     * (tape_give_grad) once b's side has read it: b's side runs first, then a's */
    const int give_a = op == BIN_ADD && a != b && tensor_numel(a) == tensor_numel(y);
    for (int k = 0; k < 2; k++) {
        const int side = give_a ? 1 - k : k;
        if (give_a && side == 0 && tape_give_grad(n, a)) continue;
        int fresh; /* a gradient buffer created now is written, not zero-filled and added to */
        tensor *x = side ? b : a, *gx = grad_buf_fresh(x, &fresh);
        if (!gx) continue;
        if (a == b && side == 1) fresh = 0; /* x * x: side 0 already wrote the shared buffer */
        if (tensor_numel(x) == tensor_numel(y)) { /* no broadcast on this side */
            BE(y)->binary_grad(op, side, nd, shape, a->data, as, b->data, bs, y->grad->data, gx->data, !fresh);
            continue;
        }
        const float *tmp = y->grad->data; /* add, and sub's a side: the gradient is gy itself */
        if (!(op == BIN_ADD || (op == BIN_SUB && side == 0))) {
            float *t = ops_scratch(y->device, tensor_numel(y));
            BE(y)->binary_grad(op, side, nd, shape, a->data, as, b->data, bs, y->grad->data, t, 0);
            tmp = t;
        }
        int64_t xs[T_MAX_DIMS];
        for (int i = 0; i < nd; i++) {
            int ix = i - (nd - x->ndim);
            xs[i] = ix >= 0 ? x->shape[ix] : 1;
        }
        float *work = ops_scratch(y->device, (int64_t)BE(y)->sum_to_workspace(nd, shape, xs));
        BE(y)->sum_to(nd, shape, tmp, xs, gx->data, !fresh, work);
    }
}

/* y = a op b (broadcast), nothing recorded */
static tensor *binary_apply(const char *name, int op, tensor *a, tensor *b) {
    OPS_F32(name, a, b);
    if (!a || !b) return NULL;
    if (a->device != b->device) {
        er_fail(ER_INPUT, "%s: operands on different devices", name);
        return NULL;
    }
    int nd;
    int64_t shape[T_MAX_DIMS], as[T_MAX_DIMS], bs[T_MAX_DIMS];
    if (broadcast(name, a, b, &nd, shape, as, bs)) return NULL;
    tensor *y = ops_new(a, nd, shape);
    BE(a)->binary(op, nd, shape, a->data, as, b->data, bs, y->data);
    return y;
}

static tensor *binary(const char *name, int op, tensor *a, tensor *b) {
    tensor *y = binary_apply(name, op, a, b);
    tensor *in[2] = {a, b};
    tape_node *n = tape_record(name, binary_backward, y, 2, in);
    if (n) n->i[0] = op;
    return y;
}

tensor *op_add(tensor *a, tensor *b) { return binary("add", BIN_ADD, a, b); }
tensor *op_sub(tensor *a, tensor *b) { return binary("sub", BIN_SUB, a, b); }
tensor *op_mul(tensor *a, tensor *b) { return binary("mul", BIN_MUL, a, b); }
tensor *op_div(tensor *a, tensor *b) { return binary("div", BIN_DIV, a, b); }

/* relu(a + b)'s backward: the ReLU's backward in place on gy (y > 0 exactly where a + b > 0; y's
 * gradient is this node's alone, as tape_give_grad assumes), then the add's backward on it. */
static void add_relu_backward(tape_node *n) {
    tensor *y = n->out;
    BE(y)->unary_backward(UN_RELU, tensor_numel(y), y->data, y->data, y->grad->data, y->grad->data, 0.0f, 0.0f, 0);
    binary_backward(n);
}

tensor *op_add_relu(tensor *a, tensor *b) {
    tensor *y = binary_apply("add_relu", BIN_ADD, a, b);
    if (!y) return NULL;
    BE(y)->unary(UN_RELU, tensor_numel(y), y->data, y->data, 0.0f, 0.0f); /* in place: one tensor */
    tensor *in[2] = {a, b};
    tape_node *n = tape_record("add_relu", add_relu_backward, y, 2, in);
    if (n) n->i[0] = BIN_ADD;
    return y;
}

/* ---- unary maps ---- */

static void unary_backward(tape_node *n) {
    int fresh; /* a fresh gx is written, not zero-filled and added to */
    tensor *x = n->in[0], *gx = grad_buf_fresh(x, &fresh), *y = n->out;
    if (!gx) return;
    BE(x)->unary_backward((int)n->i[0], tensor_numel(x), x->data, y->data, y->grad->data, gx->data,
                          n->f[0], n->f[1], !fresh);
}

static tensor *unary(const char *name, int op, tensor *x, float alpha, float beta) {
    OPS_F32(name, x);
    x = op_contiguous(x);
    if (!x) return NULL;
    tensor *y = ops_new(x, x->ndim, x->shape);
    BE(x)->unary(op, tensor_numel(x), x->data, y->data, alpha, beta);
    tape_node *n = tape_record(name, unary_backward, y, 1, &x);
    if (n) {
        n->i[0] = op;
        n->f[0] = alpha;
        n->f[1] = beta;
    }
    return y;
}

tensor *op_affine(tensor *x, float alpha, float beta) { return unary("affine", UN_AFFINE, x, alpha, beta); }
tensor *op_add_scalar(tensor *x, float s) { return unary("add_scalar", UN_AFFINE, x, 1.0f, s); }
tensor *op_mul_scalar(tensor *x, float s) { return unary("mul_scalar", UN_AFFINE, x, s, 0.0f); }
tensor *op_neg(tensor *x) { return unary("neg", UN_AFFINE, x, -1.0f, 0.0f); }
tensor *op_exp(tensor *x) { return unary("exp", UN_EXP, x, 0, 0); }
tensor *op_log(tensor *x) { return unary("log", UN_LOG, x, 0, 0); }
tensor *op_sqrt(tensor *x) { return unary("sqrt", UN_SQRT, x, 0, 0); }
tensor *op_pow(tensor *x, float p) { return unary("pow", UN_POW, x, p, 0); }
tensor *op_abs(tensor *x) { return unary("abs", UN_ABS, x, 0, 0); }
tensor *op_gelu(tensor *x) { return unary("gelu", UN_GELU, x, 0, 0); }
tensor *op_relu(tensor *x) { return unary("relu", UN_RELU, x, 0, 0); }
tensor *op_sigmoid(tensor *x) { return unary("sigmoid", UN_SIGMOID, x, 0, 0); }
tensor *op_tanh(tensor *x) { return unary("tanh", UN_TANH, x, 0, 0); }

/* ---- bias + GELU (an MLP's first linear layer and its activation in one pass) ---- */

static void bias_gelu_backward(tape_node *n) {
    tensor *x = n->in[0], *b = n->in[1], *y = n->out;
    int fresh;
    tensor *gx = grad_buf_fresh(x, &fresh), *gb = grad_buf(b);
    if (!gx && !gb) return;
    int64_t cols = b->shape[0], rows = tensor_numel(x) / cols;
    arena_mark m = ops_mark(x->device);
    float *work = ops_scratch(x->device, (int64_t)BE(x)->bias_gelu_backward_workspace(rows, cols));
    void *gxd = gx ? gx->raw : ops_scratch(x->device, rows * cols); /* frozen x: the bias's sums only (a float
                                                                       * buffer holds bf16 too) */
    BE(x)->bias_gelu_backward(rows, cols, x->dtype, x->raw, b->data, y->grad->raw, gxd, gb ? gb->data : NULL,
                              gx && !fresh, work);
    ops_release(x->device, m);
}

tensor *op_bias_gelu(tensor *x, tensor *b) {
    OPS_F32("bias_gelu", b); /* x (and y) fp32 or bf16, the bias fp32 */
    if (!x || !b) return NULL;
    if (b->ndim != 1 || x->ndim < 1 || x->shape[x->ndim - 1] != b->shape[0]) {
        char s0[96], s1[96];
        er_fail(ER_INPUT, "bias_gelu: input %s, bias %s: need [..., N] and [N]", ops_shape(x, s0), ops_shape(b, s1));
        return NULL;
    }
    x = op_contiguous(x);
    b = op_contiguous(b);
    if (!x || !b) return NULL;
    tensor *y = ops_new_dt(x, x->ndim, x->shape);
    int64_t cols = b->shape[0], rows = cols ? tensor_numel(x) / cols : 0;
    BE(x)->bias_gelu(rows, cols, x->dtype, x->raw, b->data, y->raw);
    tensor *in[2] = {x, b};
    tape_record("bias_gelu", bias_gelu_backward, y, 2, in);
    return y;
}

tensor *op_clamp(tensor *x, float lo, float hi) {
    OPS_F32("clamp", x);
    if (x && lo > hi) {
        er_fail(ER_INPUT, "clamp: lo %g > hi %g", lo, hi);
        return NULL;
    }
    return unary("clamp", UN_CLAMP, x, lo, hi);
}

/* ---- dropout ---- */

static void dropout_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x);
    if (!gx) return;
    BE(x)->dropout(tensor_numel(x), n->out->grad->data, gx->data, n->f[0], (uint64_t)n->i[0],
                   (uint64_t)n->i[1], 0, 1);
}

tensor *op_dropout(tensor *x, float p, uint64_t seed, uint64_t stream, int training) {
    OPS_F32("dropout", x);
    if (!x) return NULL;
    if (!(p >= 0.0f && p <= 1.0f)) {
        er_fail(ER_INPUT, "dropout: p = %g outside [0, 1]", p);
        return NULL;
    }
    if (!training || p == 0.0f) return x;
    x = op_contiguous(x);
    tensor *y = ops_new(x, x->ndim, x->shape);
    BE(x)->dropout(tensor_numel(x), x->data, y->data, p, seed, stream, 0, 0);
    tape_node *n = tape_record("dropout", dropout_backward, y, 1, &x);
    if (n) {
        n->i[0] = (int64_t)seed;
        n->i[1] = (int64_t)stream;
        n->f[0] = p;
    }
    return y;
}
