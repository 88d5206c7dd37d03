/* optim_kernels.h — raw-array optimizer arithmetic (the part a CUDA backend mirrors).
 *
 * These kernels know nothing about tensors or parameter groups: they update one contiguous fp32
 * array in place. nn/optim.c walks the parameters and calls them. Scalars that depend only on the
 * step (bias corrections) are computed once on the host in double and passed in, so every backend
 * does the same per-element float arithmetic.
 *
 * AdamW follows torch.optim.AdamW (decoupled weight decay, Loshchilov & Hutter):
 *   p <- p * (1 - lr*wd)
 *   m <- b1*m + (1-b1)*g          v <- b2*v + (1-b2)*g*g
 *   p <- p - (lr / bc1) * m / (sqrt(v)/sqrt(bc2) + eps),   bc_i = 1 - b_i^t, t = 1, 2, ...
 * SGD follows torch.optim.SGD (weight decay added to the gradient; dampening 0):
 *   g <- g + wd*p;  buf <- g on the first step, else mu*buf + g
 *   d <- nesterov ? g + mu*buf : buf;   p <- p - lr*d
 * `gscale` multiplies the gradient before use (1 normally; the clip coefficient when clipping), so
 * clipping costs no extra pass over the gradients. */
#ifndef ENDORET_OPTIM_KERNELS_H
#define ENDORET_OPTIM_KERNELS_H

#include <stdint.h>

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float step_size;    /* lr / (1 - beta1^t), from adamw_scalars */
    float inv_sqrt_bc2; /* 1 / sqrt(1 - beta2^t), from adamw_scalars */
    float gscale;       /* gradient multiplier (clip coefficient), 1 when unused */
} adamw_args;

/* Fill the step-dependent fields of `a` for 1-based step t (computed in double). */
void adamw_scalars(adamw_args *a, int64_t t);
void adamw_update_f32(float *p, const float *g, float *m, float *v, int64_t n, const adamw_args *a);

typedef struct {
    float lr, momentum, weight_decay, gscale;
    int nesterov;
    int first; /* 1 on the first step: momentum buffer is set to the gradient (as PyTorch) */
} sgd_args;

/* buf may be NULL when momentum == 0. */
void sgd_update_f32(float *p, const float *g, float *buf, int64_t n, const sgd_args *a);

/* Sum of squares accumulated in double (for the global gradient norm). */
double sumsq_f32(const float *x, int64_t n);
/* x *= s */
void scale_f32(float *x, int64_t n, float s);
/* 1 if every element is finite. */
int all_finite_f32(const float *x, int64_t n);

/* The same kernels as a per-device table (pointers are device memory of that device), so
 * nn/optim.c updates parameters wherever they live. CUDA builds (ENDORET_CUDA) fill the DEV_CUDA
 * entry from kernels/cuda/cuda_optim.h; otherwise optim_kernels_get(DEV_CUDA) is NULL and
 * nn/optim.c fails with a clear message instead of touching device memory. */
typedef struct {
    void (*adamw)(float *p, const float *g, float *m, float *v, int64_t n, const adamw_args *a);
    void (*sgd)(float *p, const float *g, float *buf, int64_t n, const sgd_args *a);
    double (*sumsq)(const float *x, int64_t n);
    void (*scale)(float *x, int64_t n, float s);
    int (*all_finite)(const float *x, int64_t n);
} optim_kernel_table;

extern const optim_kernel_table optim_kernels_cpu;
/* Table of a device (DEV_CPU = 0, DEV_CUDA = 1 as kernels/backend.h), or NULL when not built. */
const optim_kernel_table *optim_kernels_get(int device);

#endif
