/* optim_args.h — the arguments of the optimizer ops (adamw_many, sgd_many in kernels/ops.def): one
 * per tensor of the list.
 *
 * The ops know nothing about tensors or parameter groups: they update contiguous fp32 arrays in
 * place, each with its own args; nn/optim.c fills the lists from the parameters. Scalars that depend only on the step (bias
 * corrections) are computed once on the host in double (adamw_scalars) and passed in, so every
 * backend does the same per-element float arithmetic.
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
#ifndef ENDORET_OPTIM_ARGS_H
#define ENDORET_OPTIM_ARGS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float step_size;    /* lr / (1 - beta1^t), from adamw_scalars */
    float inv_sqrt_bc2; /* 1 / sqrt(1 - beta2^t), from adamw_scalars */
    float gscale;       /* gradient multiplier (clip coefficient), 1 when unused */
} adamw_args;

/* Fill the step-dependent fields of `a` for 1-based step t (computed in double). */
void adamw_scalars(adamw_args *a, int64_t t);

typedef struct {
    float lr, momentum, weight_decay, gscale;
    int nesterov;
    int first; /* 1 on the first step: momentum buffer is set to the gradient (as PyTorch) */
} sgd_args;

#ifdef __cplusplus
}
#endif

#endif
