/* tensor.h — a tensor is a view (shape, strides, offset) over fp32 storage on one device.
 *
 * Memory model (see nn/arena.h for the whole picture):
 *   - tensor_new / tensor_param / tensor_from_host_new: LONG-LIVED. The struct and a refcounted
 *     storage are malloc'd; tensor_free releases them (storage freed when its last long-lived view
 *     goes). Parameters get a long-lived zero-filled `grad` of the same shape, freed with them.
 *   - tensor_empty / tensor_zeros / tensor_from_host / every op result: PER-STEP. Struct and data
 *     come from the device's default arena and die at arena_reset (nn_step_end). Never tensor_free
 *     them; never keep them across steps. Per-step views of long-lived tensors are fine (the
 *     long-lived storage outlives the step); the reverse (a long-lived view of arena data) is not.
 *   - `data` points at element [0,...,0] (storage base + offset), in device memory.
 * All ops (nn/ops.h) accept any strides; kernels get contiguous data where they need it.
 * Error handling: constructors given bad shapes return NULL after er_fail (nn/base/base.h).
 *
 * Storage types (docs/dtypes.md): DT_F32 (every tensor unless asked otherwise) and DT_BF16
 * (uint16_t elements, kernels/dtype.h). Strides and offsets stay in elements; `raw` points at
 * element 0 whatever the dtype, and `data` is that same address typed float* for an fp32 tensor
 * and NULL for any other. Why two fields rather than `void *data`: some thousand lines (ops,
 * models, losses, tests) read `t->data` as float*; they keep compiling and stay correct for
 * fp32, and a bf16 tensor reaching one of them faults on NULL at once instead of being read as
 * garbage floats. Code that handles every dtype uses `raw` and tensor_elsize. The ops that take
 * bf16 are listed in docs/dtypes.md; every other op refuses a bf16 input with an error naming it. */
#ifndef ENDORET_TENSOR_H
#define ENDORET_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "nn/arena.h"

#define T_MAX_DIMS ER_MAX_DIMS

enum { DT_F32 = ER_F32, DT_BF16 = ER_BF16 }; /* kernels/dtype.h */

/* tensor flags */
enum {
    T_REQUIRES_GRAD = 1u << 0, /* gradients flow into this tensor */
    T_PARAM = 1u << 1,         /* a named, trainable parameter (long-lived, has grad) */
    T_LONG_LIVED = 1u << 2,    /* struct is malloc'd (tensor_free), not arena-owned */
    T_NO_DECAY = 1u << 3,      /* hint for optimizers: exempt from weight decay (norms, biases,
                                  pos-embed, tokens); set by tensor_param for ndim <= 1 */
    T_BF16_FRESH = 1u << 4,    /* `bf16` below holds this tensor's current values rounded */
};

typedef struct er_storage {
    void *data;     /* device memory, numel elements of the tensor's dtype */
    size_t numel;
    int device;
    int refcount;   /* long-lived views holding it */
} er_storage;

struct tape_node;

typedef struct tensor {
    float *data;                 /* first element = storage base + offset, fp32 only (NULL for bf16) */
    void *raw;                   /* first element, any dtype (== data for fp32) */
    int64_t shape[T_MAX_DIMS];
    int64_t stride[T_MAX_DIMS];  /* in elements */
    int64_t offset;              /* in elements, from the storage base */
    int ndim;                    /* 0 = scalar (numel 1) */
    int dtype;                   /* DT_F32 or DT_BF16 */
    int device;                  /* DEV_CPU / DEV_CUDA */
    uint32_t flags;
    er_storage *storage;         /* long-lived storage, NULL for arena data */
    struct tensor *grad;         /* same shape, contiguous; NULL until needed */
    char *name;                  /* parameters: timm name ("blocks.0.attn.qkv.weight") */
    struct tape_node *node;      /* op that produced it in the current tape, NULL for leaves */
    void *packed;                /* tensor_prepack: the backend's packed form, or NULL */
    struct tensor *bf16;         /* an fp32 parameter's bf16 copy, written by each optimizer step of a
                                  * bf16 run (optim_config.bf16_weights), in the optimizer's buffer
                                  * (refcounted: it outlives the optimizer; tensor_free frees it);
                                  * bf16 products read it while T_BF16_FRESH, which every write
                                  * through this API clears (as it drops `packed`) */
} tensor;

/* ---- long-lived ---- */
tensor *tensor_new(int ndim, const int64_t *shape);               /* zeros, CPU */
tensor *tensor_new_on(int device, int ndim, const int64_t *shape);/* zeros */
tensor *tensor_new_dt(int device, int dtype, int ndim, const int64_t *shape); /* zeros of dtype */
tensor *tensor_from_host_new(int ndim, const int64_t *shape, const float *host); /* CPU copy */
/* A trainable parameter named `name` (copied): zeros, T_PARAM | T_REQUIRES_GRAD, zero grad. */
tensor *tensor_param(const char *name, int ndim, const int64_t *shape);
tensor *tensor_param_on(int device, const char *name, int ndim, const int64_t *shape);
/* Frees a long-lived tensor and its grad; NULL is a no-op; arena tensors are ignored. */
void tensor_free(tensor *t);
/* Moves a long-lived tensor (and its grad) to `device` in place: new storage there holding the same
 * bits, the old storage released; the struct, name and flags stay, so pointers into a model remain
 * valid. A no-op when already there. ER_INPUT when the device is not usable or t is not a packed
 * long-lived tensor with its own storage. Models are built on the host (the same Philox draws on
 * every device) and moved: CPU and CUDA runs start bit-identical. */
int tensor_to_device(tensor *t, int device);

/* Shared long-lived storage: the optimizer's flat buffers (nn/optim_flat.c) hold many tensors as
 * views of one allocation. storage_new: zeroed, refcount 1 (the caller's reference);
 * storage_release drops one reference (the memory goes with the last). tensor_in_storage: a new
 * long-lived packed tensor viewing st at element `offset` (takes a reference; tensor_free drops
 * it). tensor_rehome: copies a tensor that owns its storage (tensor_owns_storage) into st at
 * `offset` and makes it a view there, releasing its old storage; struct, name, flags and grad
 * stay, so pointers into a model remain valid. A rehomed tensor no longer moves between devices. */
er_storage *storage_new(int device, int dtype, int64_t numel);
void storage_release(er_storage *st);
tensor *tensor_in_storage(er_storage *st, int dtype, int64_t offset, int ndim, const int64_t *shape);
int tensor_owns_storage(const tensor *t); /* packed, long-lived, offset 0, sole holder of its storage */
int tensor_rehome(tensor *t, er_storage *st, int64_t offset);

/* ---- per-step (arena) ---- */
tensor *tensor_empty(int device, int ndim, const int64_t *shape); /* uninitialised */
tensor *tensor_zeros(int device, int ndim, const int64_t *shape);
tensor *tensor_empty_dt(int device, int dtype, int ndim, const int64_t *shape);
tensor *tensor_zeros_dt(int device, int dtype, int ndim, const int64_t *shape);
tensor *tensor_from_host(int ndim, const int64_t *shape, const float *host); /* CPU, copied */
/* A per-step tensor on `device` holding a copy of the packed host array (one upload). */
tensor *tensor_upload(int device, int ndim, const int64_t *shape, const float *host);
/* A per-step view struct sharing t's data: carries T_REQUIRES_GRAD only (no name, grad or node);
 * not recorded by autograd (ops such as op_permute/op_slice record their views). */
tensor *tensor_view(const tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                    int64_t offset_elems);
/* Inference without a tape: y copied into the packed buffer `into` (taken before the mark m; same
 * dtype and device, at least y's elements) as a view of y's shape, and the device arena released
 * back to m, so what y was computed from is freed. Returns the copy; y itself, nothing released,
 * when it does not fit; NULL on error. The per-block release of vit_blocks_forward and ResNet. */
tensor *tensor_keep_released(tensor *y, tensor *into, arena_mark m);

/* ---- queries ---- */
int64_t tensor_numel(const tensor *t);
size_t tensor_elsize(const tensor *t); /* bytes per element: 4 fp32, 2 bf16 */
/* ER_OK for an fp32 tensor (or NULL); for any other dtype ER_INPUT naming `what` (an op or a
 * function that computes on fp32 only). */
int tensor_need_f32(const char *what, const tensor *t);
int tensor_is_contiguous(const tensor *t);
int tensor_same_shape(const tensor *a, const tensor *b);
const er_backend *tensor_backend(const tensor *t);
/* "[2, 3, 4]" into buf. */
const char *tensor_shape_str(const tensor *t, char *buf, size_t n);

/* ---- data ----
 * The host side of these is fp32 whatever t's dtype: a bf16 tensor is widened on the way out
 * (exact) and rounded to nearest even on the way in (kernels/dtype.h), so callers written for
 * fp32 work on any tensor. The _raw forms move the stored bytes unchanged (numel * elsize). */
/* Copies (any strides) to a packed host array of numel floats. */
void tensor_to_host(const tensor *t, float *host);
/* Writes a packed host array into t (any strides). */
void tensor_copy_from_host(tensor *t, const float *host);
void tensor_to_host_raw(const tensor *t, void *host);
void tensor_copy_from_host_raw(tensor *t, const void *host);
/* dst <- src (same shape, dtype and device, any strides); not recorded by autograd. */
int tensor_copy(tensor *dst, const tensor *src);
void tensor_fill(tensor *t, float v); /* v rounded to t's dtype */
float tensor_item(const tensor *t); /* element 0 (scalars, losses), widened to fp32 */
/* Long-lived packed copy of the same dtype (no autograd link). */
tensor *tensor_clone_new(const tensor *t);

/* ---- frozen weights (inference) ----
 * tensor_prepack keeps a long-lived 2-D weight w [out, in] (as linear layers hold it) also in its
 * backend's packed layout as the B operand of x @ w^T, so forward products stop repacking it on
 * every call (ops.def gemm_prepack; CUDA keeps none and this is a no-op there). It costs about
 * half of w's bytes again in bf16, all of them in fp32 (docs/gemm.md, "Frozen weights"). The
 * packed form is a copy made for one `compute` (GEMM_COMPUTE_*: the products that will read it,
 * fp32 ones on an fp32 x, bf16 ones on a bf16 x); a product of another compute reads w itself. Every
 * write through this API (tensor_copy_from_host, tensor_copy into it, tensor_fill,
 * tensor_to_device, an optimizer step) and tensor_free drop it. Code
 * writing w->data directly must call tensor_drop_packed. ER_INPUT for a tensor that is not a
 * long-lived 2-D fp32 one. */
int tensor_prepack(tensor *t, int compute);
void tensor_drop_packed(tensor *t);
/* Marks/unmarks a leaf as needing gradients (long-lived leaves get a long-lived grad). */
void tensor_set_requires_grad(tensor *t, int on);

/* Element helpers for shapes: SHAPE(2, 3) -> (const int64_t[]){2, 3}, count first. */
#define SHAPE(...) (const int64_t[]){__VA_ARGS__}

/* ---- parameter lists: what a model hands to optimizers, zero_grad and checkpoints ---- */
typedef struct param_list {
    tensor **t;
    int n, cap;
} param_list;

void params_add(param_list *pl, tensor *p);
void params_add_all(param_list *pl, const param_list *from); /* every tensor of from, in order */
tensor *params_find(const param_list *pl, const char *name); /* NULL if absent */
int64_t params_numel(const param_list *pl);
/* Frees every tensor in the list and the list's array. */
void params_free(param_list *pl);
/* tensor_to_device on every tensor of the list (see tensor_to_device). */
int params_to_device(const param_list *pl, int device);

#endif
