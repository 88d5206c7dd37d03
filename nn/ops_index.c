/* ops_index.c — index_select, gather and scatter along an axis (MAE keeps / restores patch order). */
#include <string.h>

#include "nn/ops_util.h"

static int check_idx(const char *op, const int32_t *idx, int64_t n, int64_t L) {
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= L)
            return er_fail(ER_INPUT, "%s: index %d at position %lld outside [0, %lld)", op, idx[i],
                           (long long)i, (long long)L);
    return ER_OK;
}

/* node i: axis, outer, L, inner, K, idx_stride; ctx: device indices */
static void gather_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x);
    if (!gx) return;
    BE(x)->scatter_add(n->i[1], n->i[4], n->i[3], n->out->grad->data, n->ctx, n->i[5], n->i[2], gx->data);
}

static tensor *gather_impl(const char *name, tensor *x, int axis, const int32_t *idx, int64_t K,
                           int per_outer) {
    OPS_F32(name, x);
    if (!x) return NULL;
    int a = ops_axis(name, x, axis);
    if (a < 0) return NULL;
    x = op_contiguous(x);
    int64_t outer, L, inner;
    ops_split3(x, a, &outer, &L, &inner);
    int64_t nidx = per_outer ? outer * K : K;
    if (check_idx(name, idx, nidx, L)) return NULL;
    int64_t sh[T_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[a] = K;
    tensor *y = ops_new(x, x->ndim, sh);
    int32_t *didx = ops_upload_idx(x->device, idx, nidx);
    int64_t istride = per_outer ? K : 0;
    BE(x)->gather(outer, L, inner, x->data, didx, istride, K, y->data);
    tape_node *n = tape_record(name, gather_backward, y, 1, &x);
    if (n) {
        n->i[0] = a;
        n->i[1] = outer;
        n->i[2] = L;
        n->i[3] = inner;
        n->i[4] = K;
        n->i[5] = istride;
        n->ctx = didx;
    }
    return y;
}

tensor *op_index_select(tensor *x, int axis, const int32_t *idx, int n) {
    return gather_impl("index_select", x, axis, idx, n, 0);
}

tensor *op_gather(tensor *x, int axis, const int32_t *idx, int K) {
    return gather_impl("gather", x, axis, idx, K, 1);
}

static void scatter_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x);
    if (!gx) return;
    /* y[o, idx[o,j]] += x[o, j]  =>  gx[o, j] += gy[o, idx[o,j]]: a gather, accumulated */
    int64_t outer = n->i[1], L = n->i[2], inner = n->i[3], K = n->i[4];
    float *tmp = ops_scratch(x->device, outer * K * inner);
    BE(x)->gather(outer, L, inner, n->out->grad->data, n->ctx, n->i[5], K, tmp);
    ops_accum(x, tmp);
}

tensor *op_scatter(tensor *x, int axis, const int32_t *idx, int64_t L) {
    OPS_F32("scatter", x);
    if (!x) return NULL;
    int a = ops_axis("scatter", x, axis);
    if (a < 0) return NULL;
    x = op_contiguous(x);
    int64_t outer, K, inner;
    ops_split3(x, a, &outer, &K, &inner);
    if (check_idx("scatter", idx, outer * K, L)) return NULL;
    int64_t sh[T_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[a] = L;
    tensor *y = tensor_zeros(x->device, x->ndim, sh);
    int32_t *didx = ops_upload_idx(x->device, idx, outer * K);
    BE(x)->scatter_add(outer, K, inner, x->data, didx, K, L, y->data);
    tape_node *n = tape_record("scatter", scatter_backward, y, 1, &x);
    if (n) {
        n->i[0] = a;
        n->i[1] = outer;
        n->i[2] = L;
        n->i[3] = inner;
        n->i[4] = K;
        n->i[5] = K;
        n->ctx = didx;
    }
    return y;
}
