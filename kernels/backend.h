/* backend.h — the op table: every arithmetic kernel of endoret as a function pointer on raw float
 * buffers of one device. nn/ops_*.c do shape checks and autograd, then call these; a backend
 * (kernels/cpu, kernels/cuda) is one filled-in `er_backend`. Adding a backend = filling a table.
 *
 * Memory model seen from a kernel: every pointer is device memory of the backend's device (host
 * memory for the CPU). Kernels never allocate: scratch space is passed in (`work`, sized by the
 * matching *_workspace function) and comes from the caller's per-step arena. Two process-lifetime
 * caches are the documented exceptions: the CUDA backend's reduction partials (made with its
 * stream and cuBLAS handle at init) and the CPU GEMM's per-thread packing panels (gemm.c). Output buffers are
 * written (`y = ...`) unless the argument is documented as accumulated (`gx += ...`): backward
 * kernels accumulate, because a tensor used twice receives the sum of both gradients.
 *
 * Conventions: sizes and strides are in elements (int64_t); "contiguous" means row-major packed.
 * Strided arguments describe an `ndim`-dim view (ndim <= ER_MAX_DIMS) over a buffer; a stride of 0
 * broadcasts. Index arrays (gather/scatter, labels) are int32 device buffers.
 * Random numbers (dropout) come from Philox rng_at(seed, stream, offset + i), so every backend
 * draws the same mask for element i.
 * The kernels themselves (signature and contract of each) are listed once, in kernels/ops.def;
 * docs/kernels.md says how to add an op or a backend. */
#ifndef ENDORET_BACKEND_H
#define ENDORET_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/conv_args.h"
#include "kernels/dtype.h"
#include "kernels/gemm_ex_args.h"
#include "kernels/optim_args.h"

#ifdef __cplusplus
extern "C" { /* the .cu files of kernels/cuda include this header from C++ */
#endif

#define ER_MAX_DIMS 6

enum { DEV_CPU = 0, DEV_CUDA = 1, DEV_COUNT = 2 };

/* Binary elementwise ops (broadcasting handled by strides). */
enum { BIN_ADD = 0, BIN_SUB, BIN_MUL, BIN_DIV, BIN_COUNT };

/* Unary elementwise ops: y = f(x; alpha, beta). */
enum {
    UN_AFFINE = 0, /* alpha * x + beta (scalar add/mul, neg) */
    UN_EXP, UN_LOG, UN_SQRT, UN_ABS,
    UN_POW,        /* x ^ alpha */
    UN_CLAMP,      /* min(max(x, alpha), beta) */
    UN_GELU,       /* x * 0.5 * (1 + erf(x / sqrt 2)) (exact erf form, as torch/timm default) */
    UN_RELU, UN_SIGMOID, UN_TANH,
    UN_COUNT
};

/* Reductions over one axis of a (outer, len, inner) contiguous block. */
enum { RED_SUM = 0, RED_MEAN, RED_MAX, RED_COUNT };

/* The longest row (cols) layernorm takes when x or y is bf16: the CPU widens such a row into
 * buffers on the thread's stack. Longer rows are refused by the op layer. */
#define ER_LAYERNORM_BF16_MAX_COLS 4096

/* Attention mask kinds. */
enum { MASK_NONE = 0, MASK_ADD = 1 /* scores += mask */, MASK_BOOL = 2 /* mask == 0 => -inf */ };

/* The size of a collective group's id (NCCL_UNIQUE_ID_BYTES). */
#define COLLECTIVE_ID_BYTES 128

typedef struct er_backend {
    const char *name;
    int device;

    /* ---- storage ---- */
    void *(*alloc)(size_t bytes);                       /* 64-byte aligned, uninitialised */
    void (*free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes);         /* device -> same device */
    void (*upload)(void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(void *dst_host, const void *src_dev, size_t bytes);

    /* ---- device services (host-side helpers of the device; trivial on the CPU) ---- */
    /* Page-locked host buffers for the loader, and an asynchronous upload from one, ordered
     * before the next kernel (the host buffer stays untouched until `synchronize` or a later
     * download). The CPU's host_alloc is an aligned malloc and its upload_async a copy. */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    void (*upload_async)(void *dst_dev, const void *src_pinned, size_t bytes);
    /* Wait for all queued work; 0, or 1 after recording an error. */
    int (*synchronize)(void);
    /* Give memory the backend keeps for reuse but that nobody holds back to the system (the CUDA
     * caching allocator's free blocks; nothing on the CPU, whose malloc returns large blocks itself).
     * Waits for queued work. For the rare moment a big buffer was replaced (arena.c's chunk merge). */
    void (*trim)(void);
    /* The allocator's bytes: the most handed out at once since the process started, and what it holds
     * free for reuse now (both 0 on the CPU, whose malloc keeps no such count). `bench train` reports them. */
    void (*memory_stats)(size_t *peak_in_use, size_t *cached);
    /* How many times the host has waited for the device since the process started (synchronize,
     * downloads, results read back, a full upload ring): each one stops the host from queueing the
     * next kernels while the device works. `bench train --profile` reports a step's; 0 on the CPU. */
    uint64_t (*host_waits)(void);
    /* First failure since the last clear ("file:line: call: message"), or NULL. Table functions
     * return void, so callers check this once per step after `synchronize`. */
    const char *(*last_error)(void);
    void (*clear_error)(void);
    /* Usable devices of this kind, and the one the table works on (0-based; before the first
     * allocation). set_device returns ER_OK, or an er_fail code naming the index. */
    int (*device_count)(void);
    int (*set_device)(int index);
    /* Data parallel on this kind of device: NCCL on CUDA (built with nccl.h); NULL on the CPU, whose
     * gradients go through MPI in host memory (nn/base/process_group.h). Rank 0's collective_id
     * fills a COLLECTIVE_ID_BYTES id that the caller sends to every rank (over MPI);
     * collective_join makes this process rank `rank` of `size` on the current device;
     * allreduce_mean replaces `count` device buffers (n[i] floats each) by their mean over the
     * ranks, ordered after the queued work. ER_OK or an er_fail code. */
    int (*collective_id)(void *id);
    int (*collective_join)(const void *id, int rank, int size);
    int (*allreduce_mean)(float *const *bufs, const int64_t *n, int count);

    /* ---- the kernels: one member per entry of kernels/ops.def ---- */
#define ER_OP(ret, name, params, args) ret(*name) params;
#include "kernels/ops.def"
#undef ER_OP
} er_backend;

/* The CPU table (kernels/cpu/backend_cpu.c). */
extern const er_backend backend_cpu;
/* The table of `device`, or NULL with er_msg() saying why (the backend is not linked in, or no
 * GPU is present at run time). The CUDA backend provides `const er_backend *backend_cuda(void)` in
 * kernels/cuda/ (referenced weakly, so a CPU-only build links without it). */
const er_backend *backend_get(int device);
const er_backend *backend_cuda(void);

#ifdef __cplusplus
}
#endif

#endif
