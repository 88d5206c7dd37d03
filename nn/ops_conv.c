/* ops_conv.c — the NCHW image ops: 2-D convolution, batch norm, max pooling and adaptive / global
 * average pooling. Shapes are checked here (one message naming the shapes and the setting at
 * fault); the kernels (kernels/ops.def, geometry in kernels/conv_args.h) see packed buffers only. */
#include "nn/ops_conv_internal.h"
#include "nn/ops_util.h"

static int need_4d(const char *op, const tensor *x) {
    if (x->ndim == 4) return 1;
    char s[96];
    er_fail(ER_INPUT, "%s: input %s: need [N, C, H, W]", op, ops_shape(x, s));
    return 0;
}

/* ---- conv2d ---- */

static void conv2d_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    int fresh; /* a fresh gx is written, not zero-filled and added to */
    tensor *gx = grad_buf_fresh(x, &fresh), *gw = grad_buf(w), *gb = grad_buf(b);
    const conv2d_args *a = n->ctx;
    arena_mark m = ops_mark(x->device);
    float *work = ops_scratch(x->device, (int64_t)BE(x)->conv2d_backward_workspace(a));
    BE(x)->conv2d_backward(a, x->data, w->data, y->grad->data, gx ? gx->data : NULL,
                           gw ? gw->data : NULL, gb ? gb->data : NULL, work, !fresh);
    ops_release(x->device, m);
}

conv2d_args *ops_conv2d_args(const char *op, const tensor *x, const char *layout, const int64_t nchw[4], const tensor *w,
                             const tensor *bias, const int stride[2], const int pad[2], const int dilation[2],
                             int groups, int compute) {
    char s0[96], s1[96], s2[96] = "none";
    if (w->ndim != 4 || groups < 1 || nchw[1] % groups || w->shape[0] % groups || w->shape[1] * groups != nchw[1] ||
        (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))) {
        er_fail(ER_INPUT, "%s: input %s, weight %s, bias %s, groups %d: need %s, [K, C / groups, R, S], [K] "
                "(groups dividing C and K)", op, ops_shape(x, s0), ops_shape(w, s1), bias ? ops_shape(bias, s2) : s2,
                groups, layout);
        return NULL;
    }
    if (stride[0] < 1 || stride[1] < 1 || pad[0] < 0 || pad[1] < 0 || dilation[0] < 1 || dilation[1] < 1) {
        er_fail(ER_INPUT, "%s: stride %dx%d, padding %dx%d, dilation %dx%d: need stride and dilation >= 1, "
                "padding >= 0", op, stride[0], stride[1], pad[0], pad[1], dilation[0], dilation[1]);
        return NULL;
    }
    for (int i = 0; i < 4; i++)
        if (nchw[i] > INT32_MAX / 4 || w->shape[i] > INT32_MAX / 4) {
            er_fail(ER_INPUT, "%s: input %s or weight %s too large", op, ops_shape(x, s0), ops_shape(w, s1));
            return NULL;
        }
    conv2d_args *a = arena_alloc_host(arena_default(x->device), sizeof *a);
    *a = (conv2d_args){.N = (int)nchw[0], .C = (int)nchw[1], .H = (int)nchw[2], .W = (int)nchw[3],
                       .K = (int)w->shape[0], .R = (int)w->shape[2], .S = (int)w->shape[3], .sh = stride[0],
                       .sw = stride[1], .ph = pad[0], .pw = pad[1], .dh = dilation[0], .dw = dilation[1],
                       .groups = groups, .compute = compute}; /* the backward reads the same args */
    conv2d_args_fill(a);
    if (a->P < 1 || a->Q < 1 || a->R < 1 || a->S < 1) {
        er_fail(ER_INPUT, "%s: a %dx%d kernel (dilation %dx%d) does not fit input %s padded by %dx%d", op, a->R,
                a->S, a->dh, a->dw, ops_shape(x, s0), a->ph, a->pw);
        return NULL;
    }
    if ((int64_t)a->C * a->R * a->S > INT32_MAX / 4 || (int64_t)a->P * a->Q > INT32_MAX / 4) {
        er_fail(ER_INPUT, "%s: input %s with weight %s: products too large", op, ops_shape(x, s0), ops_shape(w, s1));
        return NULL;
    }
    return a;
}

tensor *op_conv2d_ex(tensor *x, tensor *w, tensor *bias, const int stride[2], const int pad[2],
                     const int dilation[2], int groups, int compute) {
    OPS_F32("conv2d", x, w, bias);
    if (!x || !w) return NULL;
    if (!need_4d("conv2d", x)) return NULL;
    conv2d_args *a = ops_conv2d_args("conv2d", x, "[N, C, H, W]", x->shape, w, bias, stride, pad, dilation, groups, compute);
    if (!a) return NULL;
    x = op_contiguous(x);
    w = op_contiguous(w);
    if (bias) bias = op_contiguous(bias);
    tensor *y = ops_new(x, 4, SHAPE(a->N, a->K, a->P, a->Q));
    if (a->N > 0 && a->K > 0) {
        arena_mark m = ops_mark(x->device);
        float *work = ops_scratch(x->device, (int64_t)BE(x)->conv2d_workspace(a));
        BE(x)->conv2d(a, x->data, w->data, bias ? bias->data : NULL, y->data, work);
        ops_release(x->device, m);
    }
    tensor *in[3] = {x, w, bias};
    tape_node *n = tape_record("conv2d", conv2d_backward, y, 3, in);
    if (n) n->ctx = a;
    return y;
}

tensor *op_conv2d(tensor *x, tensor *w, tensor *bias, int stride, int pad, int dilation, int groups) {
    const int s[2] = {stride, stride}, p[2] = {pad, pad}, d[2] = {dilation, dilation};
    return op_conv2d_ex(x, w, bias, s, p, d, groups, GEMM_COMPUTE_FP32);
}

/* ---- batch norm ---- */


static void batchnorm_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    int fresh; /* a fresh gx is written, not zero-filled and added to */
    tensor *gx = grad_buf_fresh(x, &fresh), *gw = grad_buf(w), *gb = grad_buf(b);
    const ops_bn_ctx *c = n->ctx;
    int64_t N = x->shape[0], C = x->shape[1], HW = tensor_numel(x) / (N * C);
    arena_mark m = ops_mark(x->device);
    float *work = ops_scratch(x->device, (int64_t)BE(x)->batchnorm_backward_workspace(N, C, HW, c->relu));
    BE(x)->batchnorm_backward(N, C, HW, x->data, c->w, c->stats, c->stats + C, y->grad->data, c->relu ? y->data : NULL,
                              c->training, c->eps, gx ? gx->data : NULL, gw ? gw->data : NULL,
                              gb ? gb->data : NULL, work, !fresh);
    ops_release(x->device, m);
}

static int bn_vec_ok(const tensor *t, int64_t C, int device) {
    return !t || (t->ndim == 1 && t->shape[0] == C && t->device == device);
}

int ops_bn_check(const char *op, const tensor *x, int64_t C, int64_t M, const tensor *w, const tensor *b,
                 const tensor *rm, const tensor *rv, int training, float momentum, float eps) {
    char s0[96];
    if (!bn_vec_ok(w, C, x->device) || !bn_vec_ok(b, C, x->device) || !bn_vec_ok(rm, C, x->device) ||
        !bn_vec_ok(rv, C, x->device) || !rm != !rv) {
        er_fail(ER_INPUT, "%s: input %s: weight, bias, running_mean and running_var must be [%lld] "
                "on the input's device (running stats both or neither)", op, ops_shape(x, s0), (long long)C);
        return 0;
    }
    if ((rm && (!tensor_is_contiguous(rm) || (rm->flags & T_REQUIRES_GRAD))) ||
        (rv && (!tensor_is_contiguous(rv) || (rv->flags & T_REQUIRES_GRAD)))) {
        er_fail(ER_INPUT, "%s: running stats must be packed buffers without gradients", op);
        return 0;
    }
    if (!training && !rm) {
        er_fail(ER_INPUT, "%s: eval mode needs running_mean and running_var", op);
        return 0;
    }
    if (training && M < 2) {
        er_fail(ER_INPUT, "%s: input %s: training needs more than one value per channel", op, ops_shape(x, s0));
        return 0;
    }
    if (!(eps > 0) || !(momentum >= 0 && momentum <= 1)) {
        er_fail(ER_INPUT, "%s: eps %g must be > 0 and momentum %g in [0, 1]", op, eps, momentum);
        return 0;
    }
    return 1;
}

void ops_bn_affine(const tensor *x, int64_t C, const tensor *w, const tensor *b, const float **wd, const float **bd) {
    *wd = w ? w->data : NULL;
    *bd = b ? b->data : NULL;
    if (w && b) return;
    float *ones = ops_scratch(x->device, 2 * C); /* affine off: weight 1, bias 0 */
    BE(x)->fill(ones, C, 1.0f);
    BE(x)->fill(ones + C, C, 0.0f);
    if (!w) *wd = ones;
    if (!b) *bd = ones + C;
}

static tensor *batchnorm(tensor *x, tensor *w, tensor *b, tensor *rm, tensor *rv, int training,
                         float momentum, float eps, int relu) {
    OPS_F32("batchnorm2d", x, w, b, rm, rv);
    if (!x) return NULL;
    const char *op = relu ? "batchnorm2d_relu" : "batchnorm2d";
    char s0[96];
    if (x->ndim != 4 && x->ndim != 2) {
        er_fail(ER_INPUT, "%s: input %s: need [N, C, H, W] or [N, C]", op, ops_shape(x, s0));
        return NULL;
    }
    int64_t N = x->shape[0], C = x->shape[1], HW = x->ndim == 4 ? x->shape[2] * x->shape[3] : 1;
    if (!ops_bn_check(op, x, C, N * HW, w, b, rm, rv, training, momentum, eps)) return NULL;
    x = op_contiguous(x);
    if (w) w = op_contiguous(w);
    if (b) b = op_contiguous(b);
    int dev = x->device;
    const float *wd, *bd;
    ops_bn_affine(x, C, w, b, &wd, &bd);
    tensor *y = ops_new(x, x->ndim, x->shape);
    float *stats = ops_scratch(dev, 2 * C);
    /* the ReLU is fused in both directions: y = max(bn, 0) is the only tensor, and the backward
     * masks gy by y > 0 inside the BN backward (no ReLU pass, no pre-ReLU tensor kept) */
    tensor *in[3] = {x, w, b};
    if (N * C * HW > 0)
        BE(x)->batchnorm(N, C, HW, x->data, wd, bd, rm ? rm->data : NULL, rv ? rv->data : NULL,
                         training, momentum, eps, relu, y->data, stats, stats + C);
    tape_node *n = tape_record(op, batchnorm_backward, y, 3, in);
    if (n) {
        ops_bn_ctx *c = arena_alloc_host(arena_default(dev), sizeof *c);
        *c = (ops_bn_ctx){wd, stats, eps, training, relu};
        n->ctx = c;
    }
    return y;
}

tensor *op_batchnorm2d(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var,
                       int training, float momentum, float eps) {
    return batchnorm(x, w, b, running_mean, running_var, training, momentum, eps, 0);
}

tensor *op_batchnorm2d_relu(tensor *x, tensor *w, tensor *b, tensor *running_mean,
                            tensor *running_var, int training, float momentum, float eps) {
    return batchnorm(x, w, b, running_mean, running_var, training, momentum, eps, 1);
}

/* ---- max pooling ---- */

typedef struct {
    pool2d_args a;
    int32_t *argmax; /* device memory, one per output element */
} maxpool_ctx;

static void maxpool_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x), *y = n->out;
    const maxpool_ctx *c = n->ctx;
    if (gx) BE(x)->maxpool2d_backward(&c->a, y->grad->data, c->argmax, gx->data);
}

int ops_pool2d_args(const char *op, const tensor *x, const int64_t nchw[4], int kernel, int stride, int pad,
                    pool2d_args *a) {
    char s0[96];
    if (stride == 0) stride = kernel;
    if (kernel < 1 || stride < 1 || pad < 0 || pad > kernel / 2) {
        er_fail(ER_INPUT, "%s: kernel %d, stride %d, padding %d: need kernel, stride >= 1 and "
                "0 <= padding <= kernel / 2", op, kernel, stride, pad);
        return 0;
    }
    if (nchw[2] * nchw[3] > INT32_MAX || nchw[0] * nchw[1] > INT32_MAX) {
        er_fail(ER_INPUT, "%s: input %s too large", op, ops_shape(x, s0));
        return 0;
    }
    *a = (pool2d_args){.N = (int)nchw[0], .C = (int)nchw[1], .H = (int)nchw[2], .W = (int)nchw[3], .R = kernel,
                       .S = kernel, .sh = stride, .sw = stride, .ph = pad, .pw = pad};
    pool2d_args_fill(a);
    if (a->P < 1 || a->Q < 1) {
        er_fail(ER_INPUT, "%s: a %dx%d window does not fit input %s padded by %d", op, kernel, kernel,
                ops_shape(x, s0), pad);
        return 0;
    }
    return 1;
}

tensor *op_maxpool2d(tensor *x, int kernel, int stride, int pad) {
    OPS_F32("maxpool2d", x);
    if (!x || !need_4d("maxpool2d", x)) return NULL;
    maxpool_ctx *c = arena_alloc_host(arena_default(x->device), sizeof *c);
    pool2d_args *a = &c->a;
    if (!ops_pool2d_args("maxpool2d", x, x->shape, kernel, stride, pad, a)) return NULL;
    x = op_contiguous(x);
    tensor *y = ops_new(x, 4, SHAPE(a->N, a->C, a->P, a->Q));
    int64_t ny = tensor_numel(y);
    c->argmax = arena_alloc(arena_default(x->device), (size_t)(ny > 0 ? ny : 1) * sizeof(int32_t));
    if (ny > 0) BE(x)->maxpool2d(a, x->data, y->data, c->argmax);
    tape_node *n = tape_record("maxpool2d", maxpool_backward, y, 1, &x);
    if (n) n->ctx = c;
    return y;
}

/* ---- average pooling ---- */

static void avgpool_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x), *y = n->out;
    if (!gx) return;
    BE(x)->adaptive_avgpool2d_backward(x->shape[0] * x->shape[1], (int)x->shape[2], (int)x->shape[3],
                                       (int)n->i[0], (int)n->i[1], y->grad->data, gx->data);
}

tensor *op_adaptive_avgpool2d(tensor *x, int out_h, int out_w) {
    OPS_F32("adaptive_avgpool2d", x);
    if (!x || !need_4d("adaptive_avgpool2d", x)) return NULL;
    char s0[96];
    if (out_h < 1 || out_w < 1 || x->shape[2] < 1 || x->shape[3] < 1 || x->shape[2] > INT32_MAX / 2 ||
        x->shape[3] > INT32_MAX / 2) {
        er_fail(ER_INPUT, "adaptive_avgpool2d: input %s to %dx%d: need H, W >= 1 and an output >= 1x1",
                ops_shape(x, s0), out_h, out_w);
        return NULL;
    }
    x = op_contiguous(x);
    tensor *y = ops_new(x, 4, SHAPE(x->shape[0], x->shape[1], out_h, out_w));
    int64_t NC = x->shape[0] * x->shape[1];
    if (NC > 0) BE(x)->adaptive_avgpool2d(NC, (int)x->shape[2], (int)x->shape[3], out_h, out_w, x->data, y->data);
    tape_node *n = tape_record("adaptive_avgpool2d", avgpool_backward, y, 1, &x);
    if (n) {
        n->i[0] = out_h;
        n->i[1] = out_w;
    }
    return y;
}

tensor *op_global_avgpool(tensor *x) {
    OPS_F32("global_avgpool", x);
    if (!x || !need_4d("global_avgpool", x)) return NULL;
    return op_reshape(op_adaptive_avgpool2d(x, 1, 1), 2, SHAPE(x->shape[0], x->shape[1]));
}
