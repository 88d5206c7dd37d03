/* backend.h — the op table: every arithmetic kernel of endoret as a function pointer on raw float
 * buffers of one device. nn/ops_*.c do shape checks and autograd, then call these; a backend
 * (kernels/cpu, kernels/cuda) is one filled-in `er_backend`. Adding a backend = filling a table.
 *
 * Memory model seen from a kernel: every pointer is device memory of the backend's device (host
 * memory for the CPU). Kernels never allocate: scratch space is passed in (`work`, sized by the
 * matching *_workspace function) and comes from the caller's per-step arena. Output buffers are
 * written (`y = ...`) unless the argument is documented as accumulated (`gx += ...`): backward
 * kernels accumulate, because a tensor used twice receives the sum of both gradients.
 *
 * Conventions: sizes and strides are in elements (int64_t); "contiguous" means row-major packed.
 * Strided arguments describe an `ndim`-dim view (ndim <= ER_MAX_DIMS) over a buffer; a stride of 0
 * broadcasts. Index arrays (gather/scatter, labels) are int32 device buffers.
 * Random numbers (dropout) come from Philox rng_at(seed, stream, offset + i), so every backend
 * draws the same mask for element i. */
#ifndef ENDORET_BACKEND_H
#define ENDORET_BACKEND_H

#include <stddef.h>
#include <stdint.h>

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

/* Attention mask kinds. */
enum { MASK_NONE = 0, MASK_ADD = 1 /* scores += mask */, MASK_BOOL = 2 /* mask == 0 => -inf */ };

typedef struct er_backend {
    const char *name;
    int device;

    /* ---- storage ---- */
    void *(*alloc)(size_t bytes);                       /* 64-byte aligned, uninitialised */
    void (*free)(void *p);
    void (*copy)(void *dst, const void *src, size_t bytes);         /* device -> same device */
    void (*upload)(void *dst_dev, const void *src_host, size_t bytes);
    void (*download)(void *dst_host, const void *src_dev, size_t bytes);

    /* ---- data movement ---- */
    void (*fill)(float *y, int64_t n, float v);
    /* y[view ys] (+)= x[view xs] over `shape`; accumulate selects += */
    void (*copy_strided)(int ndim, const int64_t *shape, const float *x, const int64_t *xs, float *y,
                         const int64_t *ys, int accumulate);
    /* y (contiguous, `shape`) (+)= sum of x (contiguous, `xshape`) over the dims where y's shape is 1
     * (the reverse of broadcasting: gradient of a broadcast operand). ndim dims each. */
    void (*sum_to)(int ndim, const int64_t *xshape, const float *x, const int64_t *yshape, float *y,
                   int accumulate);

    /* ---- elementwise ---- */
    /* y (contiguous over shape) = a[as] op b[bs] */
    void (*binary)(int op, int ndim, const int64_t *shape, const float *a, const int64_t *as,
                   const float *b, const int64_t *bs, float *y);
    /* g (contiguous over shape) (+)= d(a op b)/d(side) * gy, side 0 = a, 1 = b; gy contiguous. */
    void (*binary_grad)(int op, int side, int ndim, const int64_t *shape, const float *a,
                        const int64_t *as, const float *b, const int64_t *bs, const float *gy,
                        float *g, int accumulate);
    void (*unary)(int op, int64_t n, const float *x, float *y, float alpha, float beta);
    /* gx += f'(x) * gy  (y = f(x) given too: exp/sqrt/sigmoid/tanh use it) */
    void (*unary_backward)(int op, int64_t n, const float *x, const float *y, const float *gy,
                           float *gx, float alpha, float beta);
    /* y (+)= x * keep_i / (1 - p), keep_i = rng_at(seed, stream, offset + i) >= p * 2^32 */
    void (*dropout)(int64_t n, const float *x, float *y, float p, uint64_t seed, uint64_t stream,
                    uint64_t offset, int accumulate);

    /* ---- reductions (double accumulation) ---- */
    /* y[o, i] = red_j x[o, j, i]; argmax (RED_MAX only, may be NULL) receives j */
    void (*reduce)(int op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y,
                   int32_t *argmax);
    /* gx[o, j, i] += d/dx of the above * gy[o, i] */
    void (*reduce_backward)(int op, int64_t outer, int64_t len, int64_t inner, const float *gy,
                            const int32_t *argmax, float *gx);

    /* ---- matrix products: see kernels/cpu/gemm.h for the contract ---- */
    void (*gemm_batched)(int transA, int transB, int m, int n, int k, float alpha, const float *A,
                         int lda, long strideA, const float *B, int ldb, long strideB, float beta,
                         float *C, int ldc, long strideC, int batch);

    /* ---- rows x cols kernels (the last axis is `cols`, rows contiguous) ---- */
    /* y = (x - mean) * rstd * w + b; mean/rstd [rows] saved for backward; w/b may be NULL */
    void (*layernorm)(int64_t rows, int64_t cols, const float *x, const float *w, const float *b,
                      float eps, float *y, float *mean, float *rstd);
    /* gx, gw, gb += (each may be NULL) */
    void (*layernorm_backward)(int64_t rows, int64_t cols, const float *x, const float *w,
                               const float *mean, const float *rstd, const float *gy, float *gx,
                               float *gw, float *gb);
    void (*softmax)(int64_t rows, int64_t cols, const float *x, float *y, int log);
    void (*softmax_backward)(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                             int log); /* gx += */
    /* y = x / max(||x||, eps); norm[rows] saved */
    void (*l2norm)(int64_t rows, int64_t cols, const float *x, float *y, float *norm, float eps);
    void (*l2norm_backward)(int64_t rows, int64_t cols, const float *y, const float *norm,
                            const float *gy, float *gx, float eps); /* gx += */
    /* loss[r] = logsumexp(x[r]) - x[r, label[r]] (0 where label < 0); lse[r] saved */
    void (*cross_entropy)(int64_t rows, int64_t cols, const float *x, const int32_t *label,
                          float *loss, float *lse);
    /* gx[r] += scale * (softmax(x[r]) - onehot(label[r])) (rows with label < 0 get nothing) */
    void (*cross_entropy_backward)(int64_t rows, int64_t cols, const float *x, const int32_t *label,
                                   const float *lse, float scale, float *gx);

    /* ---- gather / scatter along an axis of an (outer, L, inner) block ---- */
    /* y[o, j, :] = x[o, idx[o * idx_stride + j], :], j < K (idx_stride 0: same indices for all o) */
    void (*gather)(int64_t outer, int64_t L, int64_t inner, const float *x, const int32_t *idx,
                   int64_t idx_stride, int64_t K, float *y);
    /* y[o, idx[o * idx_stride + j], :] += x[o, j, :] */
    void (*scatter_add)(int64_t outer, int64_t K, int64_t inner, const float *x, const int32_t *idx,
                        int64_t idx_stride, int64_t L, float *y);

    /* ---- scaled dot-product attention, memory-efficient ----
     * q [B,H,Tq,D], k/v [B,H,Tk,D], o [B,H,Tq,D]: strides (b, h, t) per tensor, d stride 1.
     * Scores of one (b, h) are materialised at a time, per thread, in `work`.
     * mask: kind MASK_*, strides (b, h, q, k) (0 = broadcast). lse [B*H*Tq] saved for backward. */
    size_t (*attention_workspace)(int B, int H, int Tq, int Tk, int D); /* floats */
    void (*attention)(int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                      const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                      const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                      float *o, const int64_t *os, float *lse, float *work);
    /* gq, gk, gv += (strides gqs/gks/gvs; may alias one packed buffer as long as views are disjoint);
     * go has strides gos; o (forward output) strides os. Recomputes scores per head. */
    void (*attention_backward)(int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                               const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                               const int64_t *vs, int mask_kind, const float *mask,
                               const int64_t *ms, const float *o, const int64_t *os,
                               const float *go, const int64_t *gos, const float *lse, float *gq,
                               const int64_t *gqs, float *gk, const int64_t *gks, float *gv,
                               const int64_t *gvs, float *work);
} er_backend;

/* The CPU table (kernels/cpu/backend_cpu.c). */
extern const er_backend backend_cpu;
/* The table of `device` (NULL when that backend is not linked in). The CUDA backend provides
 * `const er_backend *backend_cuda(void)` in kernels/cuda/ (referenced weakly, so a CPU-only build
 * links without it); it may return NULL when no GPU is present at run time. */
const er_backend *backend_get(int device);
const er_backend *backend_cuda(void);

#ifdef __cplusplus
}
#endif

#endif
