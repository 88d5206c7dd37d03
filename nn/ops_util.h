/* ops_util.h — helpers shared by the nn/ops_*.c files (internal). */
#ifndef ENDORET_OPS_UTIL_H
#define ENDORET_OPS_UTIL_H

#include "nn/arena.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "nn/tensor.h"

#define BE(t) tensor_backend(t)

/* grad_buf (autograd.h) without the zero fill of a buffer created now: *fresh = 1 then, and the
 * caller must write every element (e.g. a gemm with beta = 0) instead of adding. autograd.c. */
tensor *grad_buf_fresh(tensor *x, int *fresh);

/* Ops that compute on fp32 only refuse any other dtype among their tensor arguments (NULL ones
 * skipped) with one error naming the op, before touching data (docs/dtypes.md lists the ops that
 * take bf16). OPS_F32(op, tensors...) returns NULL from the calling op on refusal. */
static inline int ops_need_f32(const char *op, int n, tensor *const *xs) {
    for (int i = 0; i < n; i++)
        if (tensor_need_f32(op, xs[i])) return ER_INPUT;
    return ER_OK;
}
#define OPS_F32(op, ...)                                                          \
    do {                                                                          \
        tensor *const ops_f32_args_[] = {__VA_ARGS__};                            \
        if (ops_need_f32(op, (int)(sizeof ops_f32_args_ / sizeof *ops_f32_args_), \
                         ops_f32_args_))                                          \
            return NULL;                                                          \
    } while (0)

/* A packed arena result of `like`'s dtype on its device (the shape ops, which take any dtype). */
static inline tensor *ops_new_dt(const tensor *like, int ndim, const int64_t *shape) {
    return tensor_empty_dt(like->device, like->dtype, ndim, shape);
}

/* Address of element `off` (in elements) from t's first one, any dtype. */
static inline void *ops_at(const tensor *t, int64_t off) { return (char *)t->raw + off * (int64_t)tensor_elsize(t); }

/* copy_strided of t's dtype (t gives the dtype and the device; shape has t->ndim dims unless ndim
 * says otherwise) */
static inline void ops_copy_strided(const tensor *t, int ndim, const int64_t *shape, const void *x, const int64_t *xs,
                                    void *y, const int64_t *ys, int accumulate) {
    if (t->dtype == DT_BF16) BE(t)->copy_strided_bf16(ndim, shape, x, xs, y, ys, accumulate);
    else BE(t)->copy_strided(ndim, shape, x, xs, y, ys, accumulate);
}

/* Normalises a possibly negative axis; -1 (after er_fail) when out of range. */
static inline int ops_axis(const char *op, const tensor *x, int axis) {
    int a = axis < 0 ? axis + x->ndim : axis;
    if (a < 0 || a >= x->ndim) {
        er_fail(ER_INPUT, "%s: axis %d out of range for a %d-dim tensor", op, axis, x->ndim);
        return -1;
    }
    return a;
}

/* A packed arena result on x's device. */
static inline tensor *ops_new(const tensor *like, int ndim, const int64_t *shape) {
    return tensor_empty(like->device, ndim, shape);
}

/* Device arena scratch of n floats / n int32 (valid until the step ends). */
static inline float *ops_scratch(int device, int64_t n) {
    return arena_alloc(arena_default(device), (size_t)(n > 0 ? n : 1) * sizeof(float));
}

/* Kernel scratch released after the call (arena.h): mark, ops_scratch, kernel, release. */
static inline arena_mark ops_mark(int device) { return arena_get_mark(arena_default(device)); }
static inline void ops_release(int device, arena_mark m) { arena_release(arena_default(device), m); }

/* Copies a host int32 array to device arena memory. */
static inline int32_t *ops_upload_idx(int device, const int32_t *idx, int64_t n) {
    int32_t *d = arena_alloc(arena_default(device), (size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (n > 0) backend_get(device)->upload(d, idx, (size_t)n * sizeof(int32_t));
    return d;
}

/* Split of a packed shape around `axis`: outer * len * inner. */
static inline void ops_split3(const tensor *x, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
    int64_t o = 1, in = 1;
    for (int i = 0; i < axis; i++) o *= x->shape[i];
    for (int i = axis + 1; i < x->ndim; i++) in *= x->shape[i];
    *outer = o;
    *len = x->shape[axis];
    *inner = in;
}

static inline const char *ops_shape(const tensor *t, char *buf) { return tensor_shape_str(t, buf, 96); }

/* Adds a packed gradient g (x's shape) into x's gradient buffer, if x needs one. */
static inline void ops_accum(tensor *x, const float *g) {
    tensor *gx = grad_buf(x);
    if (!gx) return;
    int64_t n = tensor_numel(x), s[1] = {1}, sh[1] = {n};
    BE(x)->copy_strided(1, sh, g, s, gx->data, s, 1);
}

#endif
