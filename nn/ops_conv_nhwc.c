/* ops_conv_nhwc.c — the channels-last image ops: activations [N, H, W, C], packed, fp32 or bf16
 * (the tensors' dtype), what cuDNN's tensor-core convolutions read without a transpose. A ResNet in
 * this layout (nn/models/resnet.c, model.layout) runs conv -> batch norm (+ shortcut + ReLU, one
 * pass) -> ... with no NCHW tensor between the stem and the pooled features. Weights, batch-norm
 * vectors, running statistics and every parameter gradient stay fp32 (the master copies); the
 * kernels round weights to the activations' type themselves. Shapes are checked with the NCHW ops'
 * own checks (ops_conv_internal.h). */
#include "nn/ops_conv_internal.h"
#include "nn/ops_util.h"

static int need_nhwc(const char *op, const tensor *x) {
    if (x->ndim == 4) return 1;
    char s[96];
    er_fail(ER_INPUT, "%s: input %s: need [N, H, W, C]", op, ops_shape(x, s));
    return 0;
}

/* x's sizes in NCHW order */
static void nchw_of(const tensor *x, int64_t s[4]) {
    s[0] = x->shape[0], s[1] = x->shape[3], s[2] = x->shape[1], s[3] = x->shape[2];
}

/* ---- convolution ---- */

static void conv2d_nhwc_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *y = n->out;
    int fresh;
    tensor *gx = grad_buf_fresh(x, &fresh), *gw = grad_buf(w);
    if (!gx && !gw) return;
    const conv2d_args *a = n->ctx;
    arena_mark m = ops_mark(x->device);
    float *work = ops_scratch(x->device, (int64_t)BE(x)->conv2d_nhwc_backward_workspace(a, x->dtype));
    BE(x)->conv2d_nhwc_backward(a, x->dtype, x->raw, w->data, y->grad->raw, gx ? gx->raw : NULL, gw ? gw->data : NULL,
                                work, !fresh);
    ops_release(x->device, m);
}

tensor *op_conv2d_nhwc(tensor *x, tensor *w, const int stride[2], const int pad[2], const int dilation[2], int groups,
                       int compute) {
    OPS_F32("conv2d_nhwc", w); /* x fp32 or bf16; the weight is the fp32 master */
    if (!x || !w || !need_nhwc("conv2d_nhwc", x)) return NULL;
    if (x->dtype == DT_BF16 && compute != GEMM_COMPUTE_BF16) {
        er_fail(ER_INPUT, "conv2d_nhwc: a bf16 input needs bf16 compute");
        return NULL;
    }
    int64_t s[4];
    nchw_of(x, s);
    conv2d_args *a = ops_conv2d_args("conv2d_nhwc", x, "[N, H, W, C]", s, w, NULL, stride, pad, dilation, groups, compute);
    if (!a) return NULL;
    x = op_contiguous(x);
    w = op_contiguous(w);
    tensor *y = ops_new_dt(x, 4, SHAPE(a->N, a->P, a->Q, a->K));
    if (a->N > 0 && a->K > 0) {
        arena_mark m = ops_mark(x->device);
        float *work = ops_scratch(x->device, (int64_t)BE(x)->conv2d_nhwc_workspace(a, x->dtype));
        BE(x)->conv2d_nhwc(a, x->dtype, x->raw, w->data, y->raw, work);
        ops_release(x->device, m);
    }
    tensor *in[2] = {x, w};
    tape_node *n = tape_record("conv2d_nhwc", conv2d_nhwc_backward, y, 2, in);
    if (n) n->ctx = a;
    return y;
}

/* ---- batch norm (+ shortcut + ReLU) ---- */

static void batchnorm_nhwc_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *z = n->in[3], *y = n->out;
    int xfresh, zfresh = 1;
    tensor *gx = grad_buf_fresh(x, &xfresh), *gw = grad_buf(w), *gb = grad_buf(b);
    tensor *gz = z ? grad_buf_fresh(z, &zfresh) : NULL;
    if (!gx && !gw && !gb && !gz) return;
    const ops_bn_ctx *c = n->ctx;
    int64_t C = x->shape[3], M = tensor_numel(x) / (C ? C : 1);
    arena_mark m = ops_mark(x->device);
    float *work = ops_scratch(x->device, (int64_t)BE(x)->batchnorm_nhwc_backward_workspace(M, C));
    BE(x)->batchnorm_nhwc_backward(M, C, x->dtype, x->raw, c->w, c->stats, c->stats + C, y->grad->raw,
                                   c->relu ? y->raw : NULL, c->training, c->eps, gx ? gx->raw : NULL, !xfresh,
                                   gw ? gw->data : NULL, gb ? gb->data : NULL, gz ? gz->raw : NULL, !zfresh, work);
    ops_release(x->device, m);
}

tensor *op_batchnorm_nhwc(tensor *x, tensor *w, tensor *b, tensor *rm, tensor *rv, int training, float momentum,
                          float eps, tensor *z, int relu) {
    OPS_F32("batchnorm_nhwc", w, b, rm, rv);
    if (!x || !need_nhwc("batchnorm_nhwc", x)) return NULL;
    char s0[96], s1[96];
    if (z && (z->ndim != 4 || z->dtype != x->dtype || z->device != x->device ||
              memcmp(z->shape, x->shape, sizeof(int64_t) * 4) || z->raw == x->raw)) {
        er_fail(ER_INPUT, "batchnorm_nhwc: shortcut %s (%s) for input %s (%s): need another tensor of the input's "
                "shape, dtype and device", ops_shape(z, s0), er_dtype_name(z->dtype), ops_shape(x, s1),
                er_dtype_name(x->dtype));
        return NULL;
    }
    int64_t C = x->shape[3], M = x->shape[0] * x->shape[1] * x->shape[2];
    if (!ops_bn_check("batchnorm_nhwc", x, C, M, w, b, rm, rv, training, momentum, eps)) return NULL;
    x = op_contiguous(x);
    if (z) z = op_contiguous(z);
    if (w) w = op_contiguous(w);
    if (b) b = op_contiguous(b);
    const float *wd, *bd;
    ops_bn_affine(x, C, w, b, &wd, &bd);
    tensor *y = ops_new_dt(x, 4, x->shape);
    float *stats = ops_scratch(x->device, 2 * C);
    if (M * C > 0)
        BE(x)->batchnorm_nhwc(M, C, x->dtype, x->raw, wd, bd, rm ? rm->data : NULL, rv ? rv->data : NULL, training,
                              momentum, eps, z ? z->raw : NULL, relu, y->raw, stats, stats + C);
    /* one output tensor: the backward masks gy by y > 0 and hands the masked gradient to the shortcut */
    tensor *in[4] = {x, w, b, z};
    tape_node *n = tape_record(z ? "batchnorm_add_nhwc" : "batchnorm_nhwc", batchnorm_nhwc_backward, y, 4, in);
    if (n) {
        ops_bn_ctx *c = arena_alloc_host(arena_default(x->device), sizeof *c);
        *c = (ops_bn_ctx){wd, stats, eps, training, relu};
        n->ctx = c;
    }
    return y;
}

/* ---- max pooling ---- */

typedef struct {
    pool2d_args a;
    int32_t *argmax; /* device memory, one per output element */
} maxpool_nhwc_ctx;

static void maxpool2d_nhwc_backward(tape_node *n) {
    tensor *x = n->in[0], *y = n->out;
    int fresh;
    tensor *gx = grad_buf_fresh(x, &fresh);
    const maxpool_nhwc_ctx *c = n->ctx;
    if (gx) BE(x)->maxpool2d_nhwc_backward(&c->a, x->dtype, y->grad->raw, c->argmax, gx->raw, !fresh);
}

tensor *op_maxpool2d_nhwc(tensor *x, int kernel, int stride, int pad) {
    if (!x || !need_nhwc("maxpool2d_nhwc", x)) return NULL;
    int64_t s[4];
    nchw_of(x, s);
    maxpool_nhwc_ctx *c = arena_alloc_host(arena_default(x->device), sizeof *c);
    pool2d_args *a = &c->a;
    if (!ops_pool2d_args("maxpool2d_nhwc", x, s, kernel, stride, pad, a)) return NULL;
    x = op_contiguous(x);
    tensor *y = ops_new_dt(x, 4, SHAPE(a->N, a->P, a->Q, a->C));
    int64_t ny = tensor_numel(y);
    c->argmax = arena_alloc(arena_default(x->device), (size_t)(ny > 0 ? ny : 1) * sizeof(int32_t));
    if (ny > 0) BE(x)->maxpool2d_nhwc(a, x->dtype, x->raw, y->raw, c->argmax);
    tape_node *n = tape_record("maxpool2d_nhwc", maxpool2d_nhwc_backward, y, 1, &x);
    if (n) n->ctx = c;
    return y;
}

/* ---- global average pooling ---- */

static void avgpool_nhwc_backward(tape_node *n) {
    tensor *x = n->in[0], *y = n->out;
    int fresh;
    tensor *gx = grad_buf_fresh(x, &fresh);
    if (gx)
        BE(x)->avgpool_nhwc_backward(x->shape[0], x->shape[1] * x->shape[2], x->shape[3], x->dtype, y->grad->data,
                                     gx->raw, !fresh);
}

tensor *op_global_avgpool_nhwc(tensor *x) {
    if (!x || !need_nhwc("global_avgpool_nhwc", x)) return NULL;
    if (x->shape[1] * x->shape[2] < 1) {
        char s0[96];
        er_fail(ER_INPUT, "global_avgpool_nhwc: input %s: need H, W >= 1", ops_shape(x, s0));
        return NULL;
    }
    x = op_contiguous(x);
    tensor *y = ops_new(x, 2, SHAPE(x->shape[0], x->shape[3])); /* fp32: the features feed fp32 heads */
    if (tensor_numel(y) > 0)
        BE(x)->avgpool_nhwc(x->shape[0], x->shape[1] * x->shape[2], x->shape[3], x->dtype, x->raw, y->data);
    tape_record("global_avgpool_nhwc", avgpool_nhwc_backward, y, 1, &x);
    return y;
}

/* ---- layout changes ---- */

tensor *op_to_nhwc(tensor *x, int dtype) {
    if (!x) return NULL;
    if (x->ndim != 4) {
        char s0[96];
        er_fail(ER_INPUT, "to_nhwc: input %s: need [N, C, H, W]", ops_shape(x, s0));
        return NULL;
    }
    tensor *p = op_permute(x, (const int[]){0, 2, 3, 1});
    return p && p->dtype != dtype ? op_cast(p, dtype) : op_contiguous(p);
}

tensor *op_to_nchw(tensor *x, int dtype) {
    if (!x || !need_nhwc("to_nchw", x)) return NULL;
    tensor *p = op_permute(x, (const int[]){0, 3, 1, 2});
    return p && p->dtype != dtype ? op_cast(p, dtype) : op_contiguous(p);
}
