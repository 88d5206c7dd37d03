/* tensor.c — tensor views, long-lived and per-step construction, host transfer, param lists. */
#include "nn/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/arena.h"
#include "nn/base/base.h"

static int check_shape(int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > T_MAX_DIMS) return er_fail(ER_INPUT, "tensor: %d dims (max %d)", ndim, T_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return er_fail(ER_INPUT, "tensor: negative size %lld in dim %d", (long long)shape[i], i);
    return ER_OK;
}

static void set_packed(tensor *t, int ndim, const int64_t *shape) {
    t->ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = s;
        s *= shape[i];
    }
}

static int64_t shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

const er_backend *tensor_backend(const tensor *t) { return backend_get(t->device); }

/* ---------------- long-lived ---------------- */

static int check_dtype(int dtype) {
    if (dtype != DT_F32 && dtype != DT_BF16) return er_fail(ER_INPUT, "tensor: unknown dtype %d", dtype);
    return ER_OK;
}

/* data / raw of t pointing at `p` (element 0) */
static void set_ptr(tensor *t, void *p) {
    t->raw = p;
    t->data = t->dtype == DT_F32 ? (float *)p : NULL;
}

tensor *tensor_new_on(int device, int ndim, const int64_t *shape) { return tensor_new_dt(device, DT_F32, ndim, shape); }

tensor *tensor_new_dt(int device, int dtype, int ndim, const int64_t *shape) {
    if (check_shape(ndim, shape) || check_dtype(dtype)) return NULL;
    const er_backend *be = backend_get(device);
    if (!be) {
        er_fail(ER_INPUT, "tensor: device %d not compiled in", device);
        return NULL;
    }
    tensor *t = xcalloc(1, sizeof *t);
    set_packed(t, ndim, shape);
    t->device = device;
    t->dtype = dtype;
    t->flags = T_LONG_LIVED;
    int64_t n = shape_numel(ndim, shape);
    er_storage *st = xcalloc(1, sizeof *st);
    st->numel = (size_t)n;
    st->device = device;
    st->refcount = 1;
    st->data = be->alloc((size_t)(n > 0 ? n : 1) * tensor_elsize(t));
    t->storage = st;
    set_ptr(t, st->data);
    tensor_fill(t, 0.0f);
    return t;
}

tensor *tensor_new(int ndim, const int64_t *shape) { return tensor_new_on(DEV_CPU, ndim, shape); }

tensor *tensor_from_host_new(int ndim, const int64_t *shape, const float *host) { /* fp32 */
    tensor *t = tensor_new(ndim, shape);
    if (t && host) memcpy(t->data, host, (size_t)tensor_numel(t) * sizeof(float));
    return t;
}

tensor *tensor_param_on(int device, const char *name, int ndim, const int64_t *shape) {
    tensor *t = tensor_new_on(device, ndim, shape);
    if (!t) return NULL;
    t->flags |= T_PARAM | T_REQUIRES_GRAD;
    if (ndim <= 1) t->flags |= T_NO_DECAY;
    t->name = xstrdup(name ? name : "");
    t->grad = tensor_new_on(device, ndim, shape);
    return t;
}

tensor *tensor_param(const char *name, int ndim, const int64_t *shape) {
    return tensor_param_on(DEV_CPU, name, ndim, shape);
}

int tensor_prepack(tensor *t, int compute) {
    if (!t || !(t->flags & T_LONG_LIVED) || t->ndim != 2 || t->stride[1] != 1 || t->stride[0] < t->shape[1])
        return er_fail(ER_INPUT, "tensor_prepack: '%s' is not a long-lived 2-D weight with unit column stride",
                       t && t->name ? t->name : "?");
    if (tensor_need_f32("tensor_prepack", t)) return ER_INPUT;
    tensor_drop_packed(t);
    tensor_backend(t)->gemm_prepack(compute, 1, (int)t->shape[1], (int)t->shape[0], t->data, (int)t->stride[0], &t->packed);
    return ER_OK;
}

void tensor_drop_packed(tensor *t) {
    if (t) t->flags &= ~T_BF16_FRESH; /* written: the optimizer's bf16 copy is stale too */
    if (!t || !t->packed) return;
    tensor_backend(t)->gemm_prepack_free(t->packed);
    t->packed = NULL;
}

void tensor_free(tensor *t) {
    if (!t || !(t->flags & T_LONG_LIVED)) return;
    tensor_drop_packed(t);
    tensor_free(t->bf16);
    storage_release(t->storage);
    if (t->grad) tensor_free(t->grad);
    free(t->name);
    free(t);
}

static int move_storage(tensor *t, int device) {
    if (t->device == device) return ER_OK;
    const er_backend *to = backend_get(device);
    if (!to) return er_fail(ER_INPUT, "tensor '%s': device %d is not usable (%s)", t->name ? t->name : "?", device, er_msg());
    if (!tensor_owns_storage(t))
        return er_fail(ER_INPUT, "tensor '%s': only a packed long-lived tensor with its own storage can move", t->name ? t->name : "?");
    const er_backend *from = backend_get(t->device);
    size_t n = t->storage->numel, bytes = n * tensor_elsize(t);
    void *dst = to->alloc(bytes > 0 ? bytes : sizeof(float));
    if (t->device == DEV_CPU) {
        to->upload(dst, t->raw, bytes);
    } else if (device == DEV_CPU) {
        from->download(dst, t->raw, bytes);
    } else { /* device to another device: through the host */
        void *tmp = xmalloc(bytes > 0 ? bytes : sizeof(float));
        from->download(tmp, t->raw, bytes);
        to->upload(dst, tmp, bytes);
        free(tmp);
    }
    from->free(t->storage->data);
    t->storage->data = dst;
    t->storage->device = device;
    set_ptr(t, dst);
    t->device = device;
    return ER_OK;
}

/* ---------------- shared storage (flat buffers, nn/optim_flat.c) ---------------- */

er_storage *storage_new(int device, int dtype, int64_t numel) {
    const er_backend *be = backend_get(device);
    if (!be || check_dtype(dtype) || numel < 0) {
        er_fail(ER_INPUT, "storage: device %d / dtype %d / %lld elements not possible", device, dtype, (long long)numel);
        return NULL;
    }
    size_t bytes = (size_t)numel * er_dtype_size(dtype);
    size_t words = (bytes + sizeof(float) - 1) / sizeof(float); /* zeroed as fp32 words: all bits 0 */
    er_storage *st = xcalloc(1, sizeof *st);
    st->numel = (size_t)numel;
    st->device = device;
    st->refcount = 1;
    st->data = be->alloc(words ? words * sizeof(float) : sizeof(float));
    if (words) be->fill(st->data, (int64_t)words, 0.0f);
    return st;
}

void storage_release(er_storage *st) {
    if (st && --st->refcount == 0) {
        backend_get(st->device)->free(st->data);
        free(st);
    }
}

tensor *tensor_in_storage(er_storage *st, int dtype, int64_t offset, int ndim, const int64_t *shape) {
    if (check_shape(ndim, shape) || check_dtype(dtype)) return NULL;
    if (offset < 0 || offset + shape_numel(ndim, shape) > (int64_t)st->numel) {
        er_fail(ER_INPUT, "tensor_in_storage: elements [%lld, %lld) outside a storage of %zu", (long long)offset,
                (long long)(offset + shape_numel(ndim, shape)), st->numel);
        return NULL;
    }
    tensor *t = xcalloc(1, sizeof *t);
    set_packed(t, ndim, shape);
    t->device = st->device;
    t->dtype = dtype;
    t->flags = T_LONG_LIVED;
    t->storage = st;
    t->offset = offset;
    st->refcount++;
    set_ptr(t, (char *)st->data + (size_t)offset * tensor_elsize(t));
    return t;
}

int tensor_owns_storage(const tensor *t) {
    return t && (t->flags & T_LONG_LIVED) && t->storage && t->storage->refcount == 1 && t->offset == 0 &&
           tensor_is_contiguous(t) && (int64_t)t->storage->numel == tensor_numel(t);
}

int tensor_rehome(tensor *t, er_storage *st, int64_t offset) {
    if (!tensor_owns_storage(t) || st->device != t->device || offset < 0 || offset + tensor_numel(t) > (int64_t)st->numel)
        return er_fail(ER_INPUT, "tensor '%s': only a packed long-lived tensor with its own storage moves into a shared one that holds it",
                       t && t->name ? t->name : "?");
    const er_backend *be = backend_get(t->device);
    void *dst = (char *)st->data + (size_t)offset * tensor_elsize(t);
    tensor_drop_packed(t);
    be->copy(dst, t->raw, (size_t)tensor_numel(t) * tensor_elsize(t));
    storage_release(t->storage);
    st->refcount++;
    t->storage = st;
    t->offset = offset;
    set_ptr(t, dst);
    return ER_OK;
}

int tensor_to_device(tensor *t, int device) {
    if (!t) return ER_OK;
    if (t->device != device) tensor_drop_packed(t);
    int rc = move_storage(t, device);
    if (!rc && t->grad) rc = move_storage(t->grad, device);
    return rc;
}

int params_to_device(const param_list *pl, int device) {
    for (int i = 0; i < pl->n; i++) {
        int rc = tensor_to_device(pl->t[i], device);
        if (rc) return rc;
    }
    return ER_OK;
}

/* ---------------- per-step ---------------- */

tensor *tensor_empty(int device, int ndim, const int64_t *shape) { return tensor_empty_dt(device, DT_F32, ndim, shape); }

tensor *tensor_empty_dt(int device, int dtype, int ndim, const int64_t *shape) {
    if (check_shape(ndim, shape) || check_dtype(dtype)) return NULL;
    arena *a = arena_default(device);
    if (!a) {
        er_fail(ER_INPUT, "tensor: device %d not compiled in", device);
        return NULL;
    }
    tensor *t = arena_alloc_host(a, sizeof *t);
    set_packed(t, ndim, shape);
    t->device = device;
    t->dtype = dtype;
    set_ptr(t, arena_alloc(a, (size_t)shape_numel(ndim, shape) * tensor_elsize(t)));
    return t;
}

tensor *tensor_zeros(int device, int ndim, const int64_t *shape) {
    tensor *t = tensor_empty(device, ndim, shape);
    if (t) backend_get(device)->fill(t->data, tensor_numel(t), 0.0f);
    return t;
}

tensor *tensor_zeros_dt(int device, int dtype, int ndim, const int64_t *shape) {
    tensor *t = tensor_empty_dt(device, dtype, ndim, shape);
    if (t) tensor_fill(t, 0.0f);
    return t;
}

tensor *tensor_from_host(int ndim, const int64_t *shape, const float *host) {
    tensor *t = tensor_empty(DEV_CPU, ndim, shape);
    if (t && host) memcpy(t->data, host, (size_t)tensor_numel(t) * sizeof(float));
    return t;
}

tensor *tensor_upload(int device, int ndim, const int64_t *shape, const float *host) {
    tensor *t = tensor_empty(device, ndim, shape);
    if (t && host) backend_get(device)->upload(t->data, host, (size_t)tensor_numel(t) * sizeof(float));
    return t;
}

tensor *tensor_view(const tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                    int64_t offset_elems) {
    if (check_shape(ndim, shape)) return NULL;
    tensor *v = arena_alloc_host(arena_default(t->device), sizeof *v);
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v->shape[i] = shape[i];
        v->stride[i] = stride[i];
    }
    v->device = t->device;
    v->dtype = t->dtype;
    v->flags = t->flags & T_REQUIRES_GRAD;
    set_ptr(v, (char *)t->raw + offset_elems * (int64_t)tensor_elsize(t));
    v->offset = t->offset + offset_elems;
    v->packed = NULL; /* a view never owns a packed form */
    return v;
}

tensor *tensor_keep_released(tensor *y, tensor *into, arena_mark m) {
    if (!y || !into || y->dtype != into->dtype || y->device != into->device || tensor_numel(y) > tensor_numel(into)) return y;
    int64_t st[T_MAX_DIMS], acc = 1;
    for (int i = y->ndim - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= y->shape[i];
    }
    tensor *o = tensor_view(into, y->ndim, y->shape, st, 0);
    if (!o || tensor_copy(o, y)) return NULL;
    arena_release(arena_default(y->device), m);
    return o;
}

/* ---------------- queries ---------------- */

int64_t tensor_numel(const tensor *t) { return shape_numel(t->ndim, t->shape); }

size_t tensor_elsize(const tensor *t) { return er_dtype_size(t->dtype); }

int tensor_need_f32(const char *what, const tensor *t) {
    if (!t || t->dtype == DT_F32) return ER_OK;
    return er_fail(ER_INPUT, "%s: takes fp32 tensors only, got a %s tensor (cast it with op_cast; docs/dtypes.md "
                   "lists the ops that take bf16)", what, er_dtype_name(t->dtype));
}

int tensor_is_contiguous(const tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

int tensor_same_shape(const tensor *a, const tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *tensor_shape_str(const tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* ---------------- data ---------------- */

static void packed_strides(const tensor *t, int64_t *s) {
    int64_t acc = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= t->shape[i];
    }
}

/* strided copy of t's dtype on t's backend, over ndim dims */
static void copy_strided_dt(const tensor *t, int ndim, const int64_t *shape, const void *x, const int64_t *xs, void *y,
                            const int64_t *ys, int acc) {
    const er_backend *be = tensor_backend(t);
    if (t->dtype == DT_BF16) be->copy_strided_bf16(ndim, shape, x, xs, y, ys, acc);
    else be->copy_strided(ndim, shape, x, xs, y, ys, acc);
}

void tensor_to_host_raw(const tensor *t, void *host) {
    const er_backend *be = tensor_backend(t);
    int64_t n = tensor_numel(t);
    size_t bytes = (size_t)n * tensor_elsize(t);
    if (tensor_is_contiguous(t)) {
        be->download(host, t->raw, bytes);
        return;
    }
    int64_t ps[T_MAX_DIMS];
    packed_strides(t, ps);
    if (t->device == DEV_CPU) {
        copy_strided_dt(t, t->ndim, t->shape, t->raw, t->stride, host, ps, 0);
        return;
    }
    void *tmp = be->alloc(bytes ? bytes : 4);
    copy_strided_dt(t, t->ndim, t->shape, t->raw, t->stride, tmp, ps, 0);
    be->download(host, tmp, bytes);
    be->free(tmp);
}

void tensor_copy_from_host_raw(tensor *t, const void *host) {
    const er_backend *be = tensor_backend(t);
    tensor_drop_packed(t);
    int64_t n = tensor_numel(t);
    size_t bytes = (size_t)n * tensor_elsize(t);
    if (tensor_is_contiguous(t)) {
        be->upload(t->raw, host, bytes);
        return;
    }
    int64_t ps[T_MAX_DIMS];
    packed_strides(t, ps);
    if (t->device == DEV_CPU) {
        copy_strided_dt(t, t->ndim, t->shape, host, ps, t->raw, t->stride, 0);
        return;
    }
    void *tmp = be->alloc(bytes ? bytes : 4);
    be->upload(tmp, host, bytes);
    copy_strided_dt(t, t->ndim, t->shape, tmp, ps, t->raw, t->stride, 0);
    be->free(tmp);
}

/* fp32 at the host boundary: the stored bytes, converted on the host (exact widening; rounding to
 * nearest even when narrowing: the same function as the backends' cast) */
void tensor_to_host(const tensor *t, float *host) {
    if (t->dtype == DT_F32) {
        tensor_to_host_raw(t, host);
        return;
    }
    int64_t n = tensor_numel(t);
    uint16_t *h = xmalloc((size_t)(n ? n : 1) * sizeof(uint16_t));
    tensor_to_host_raw(t, h);
    backend_cpu.cast(n, DT_BF16, h, DT_F32, host, 0);
    free(h);
}

void tensor_copy_from_host(tensor *t, const float *host) {
    if (t->dtype == DT_F32) {
        tensor_copy_from_host_raw(t, host);
        return;
    }
    int64_t n = tensor_numel(t);
    uint16_t *h = xmalloc((size_t)(n ? n : 1) * sizeof(uint16_t));
    backend_cpu.cast(n, DT_F32, host, DT_BF16, h, 0);
    tensor_copy_from_host_raw(t, h);
    free(h);
}

int tensor_copy(tensor *dst, const tensor *src) {
    if (!tensor_same_shape(dst, src) || dst->device != src->device || dst->dtype != src->dtype) {
        char a[96], b[96];
        return er_fail(ER_INPUT, "tensor_copy: %s %s and %s %s differ in shape, dtype or device (op_cast converts dtypes)",
                       er_dtype_name(dst->dtype), tensor_shape_str(dst, a, sizeof a), er_dtype_name(src->dtype),
                       tensor_shape_str(src, b, sizeof b));
    }
    tensor_drop_packed(dst);
    copy_strided_dt(dst, dst->ndim, dst->shape, src->raw, src->stride, dst->raw, dst->stride, 0);
    return ER_OK;
}

/* y[view ys] over `shape` = v, v of t's dtype broadcast from device memory by zero strides */
static void fill_view(const tensor *t, int ndim, const int64_t *shape, void *y, const int64_t *ys, float v) {
    const er_backend *be = tensor_backend(t);
    int64_t zs[T_MAX_DIMS] = {0};
    uint16_t hb = er_f32_to_bf16(v);
    void *dv = arena_alloc(arena_default(t->device), sizeof(float));
    be->upload(dv, t->dtype == DT_BF16 ? (const void *)&hb : (const void *)&v, tensor_elsize(t));
    copy_strided_dt(t, ndim, shape, dv, zs, y, ys, 0);
}

void tensor_fill(tensor *t, float v) {
    const er_backend *be = tensor_backend(t);
    tensor_drop_packed(t);
    if (t->dtype == DT_F32 && tensor_is_contiguous(t)) {
        be->fill(t->data, tensor_numel(t), v);
        return;
    }
    const int64_t n = tensor_numel(t);
    if (t->dtype == DT_BF16 && v == 0.0f && !signbit(v) && tensor_is_contiguous(t) && n > 1 &&
        !((uintptr_t)t->raw & 3)) {
        /* +0 in bf16 is a zero half-word: each pair is one fp32 +0 word (the fill kernel instead of a
         * strided copy that computes an index per element), an odd last element on its own */
        be->fill((float *)t->raw, n / 2, 0.0f);
        const int64_t one = 1;
        if (n & 1) fill_view(t, 1, &one, (uint16_t *)t->raw + (n - 1), &one, 0.0f);
        return;
    }
    fill_view(t, t->ndim, t->shape, t->raw, t->stride, v);
}

float tensor_item(const tensor *t) {
    float v;
    if (t->dtype == DT_BF16) {
        uint16_t h;
        tensor_backend(t)->download(&h, t->raw, sizeof h);
        return er_bf16_to_f32(h);
    }
    tensor_backend(t)->download(&v, t->data, sizeof v);
    return v;
}

tensor *tensor_clone_new(const tensor *t) {
    tensor *c = tensor_new_dt(t->device, t->dtype, t->ndim, t->shape);
    if (c) tensor_copy(c, t);
    return c;
}

void tensor_set_requires_grad(tensor *t, int on) {
    if (on) t->flags |= T_REQUIRES_GRAD;
    else t->flags &= ~(uint32_t)T_REQUIRES_GRAD;
}

/* ---------------- parameter lists ---------------- */

void params_add(param_list *pl, tensor *p) {
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? 2 * pl->cap : 16;
        pl->t = xrealloc(pl->t, (size_t)pl->cap * sizeof *pl->t);
    }
    pl->t[pl->n++] = p;
}

void params_add_all(param_list *pl, const param_list *from) {
    for (int i = 0; i < from->n; i++) params_add(pl, from->t[i]);
}

tensor *params_find(const param_list *pl, const char *name) {
    for (int i = 0; i < pl->n; i++)
        if (pl->t[i]->name && strcmp(pl->t[i]->name, name) == 0) return pl->t[i];
    return NULL;
}

int64_t params_numel(const param_list *pl) {
    int64_t n = 0;
    for (int i = 0; i < pl->n; i++) n += tensor_numel(pl->t[i]);
    return n;
}

void params_free(param_list *pl) {
    for (int i = 0; i < pl->n; i++) tensor_free(pl->t[i]);
    free(pl->t);
    pl->t = NULL;
    pl->n = pl->cap = 0;
}
