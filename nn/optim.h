/* optim.h — AdamW and SGD over a model's parameter list (nn/tensor.h param_list).
 *
 * Each parameter gets its own lr multiplier and weight decay, which is how timm/MAE parameter
 * groups are expressed here:
 *   - weight decay: cfg.weight_decay, or 0 when optim_no_weight_decay(p) (timm's
 *     param_groups_weight_decay rule: 1-D tensors such as norm weights and biases, names ending in
 *     ".bias", and the tokens / position embeddings pos_embed, *_pos_embed, cls_token, dist_token,
 *     reg_token, register_tokens, mask_token; plus anything flagged T_NO_DECAY);
 *   - lr multiplier: 1, or decay^(depth + 1 - layer_id) with layer-wise lr decay (nn/schedule.h),
 *     as MAE/BEiT fine-tuning.
 * Both can be overridden per parameter after optim_new (o->ps[i].lr_scale / .wd).
 *
 * A step: optim_set_lr(o, lr_at(&sched, step)); [optim_clip_grad_norm]; optim_step(o);
 * optim_zero_grad(o). Parameters without T_REQUIRES_GRAD (frozen) are skipped and get no state.
 * State (AdamW m/v, SGD momentum) is long-lived, on the parameter's device, fp32.
 *
 * Flat buffers (nn/optim_flat.c): optim_new moves the trainable parameters and their gradients
 * into one allocation per device each, and allocates the moments the same way; the tensors become
 * views there (the structs, names and flags stay). So zero_grad is one fill, the update a few
 * multi-tensor spans and the data-parallel all-reduce one buffer (optim_grad_buffers). Afterwards
 * those parameters cannot move between devices: move the model first, then make the optimizer. */
#ifndef ENDORET_OPTIM_H
#define ENDORET_OPTIM_H

#include <stdint.h>

#include "nn/tensor.h"

typedef enum { OPTIM_ADAMW = 0, OPTIM_SGD = 1 } optim_kind;

typedef struct {
    optim_kind kind;
    double lr;             /* initial lr (optim_set_lr changes it per step) */
    double weight_decay;   /* AdamW: decoupled; SGD: added to the gradient (PyTorch semantics) */
    double beta1, beta2, eps; /* AdamW (0.9, 0.999, 1e-8 when all three are 0) */
    double momentum;       /* SGD */
    int nesterov;          /* SGD */
    double layer_decay;    /* layer-wise lr decay factor; 0 or 1 = off */
    int depth;             /* number of ViT blocks, for layer_decay */
    int bf16_weights;      /* mixed precision: every step also writes each flat parameter's bf16
                            * copy (tensor.bf16) in the same pass, the operand bf16 products read
                            * instead of rounding the weight per call (2 bytes per parameter) */
} optim_config;

typedef struct {
    tensor *p;
    tensor *m, *v;    /* AdamW moments; SGD: m is the momentum buffer (NULL without momentum) */
    float lr_scale;   /* multiplies the optimizer lr */
    float wd;         /* this parameter's weight decay */
    int flat;         /* p, its grad, m and v live in the optimizer's flat buffers */
} optim_param;

typedef struct optimizer {
    optim_config cfg;
    optim_param *ps;
    int n;
    int64_t step;  /* updates done so far (AdamW bias correction uses step + 1) */
    double lr;     /* current base lr */
    struct optim_arrays *arrays; /* private (nn/optim.c): host arrays for the multi-tensor ops */
    struct optim_flat *flat;     /* private (nn/optim_flat.c): the flat buffers, NULL when none */
    const float *guard;          /* private: optim_guard's gscale for the next optim_step, or NULL */
} optimizer;

/* The timm weight-decay exemption rule described above. */
int optim_no_weight_decay(const tensor *p);

/* NULL (er_msg set) on a bad config (negative lr, betas outside [0,1), nesterov without momentum)
 * or a parameter on a device without optimizer kernels. */
optimizer *optim_new(const optim_config *cfg, const param_list *pl);
void optim_free(optimizer *o);
void optim_set_lr(optimizer *o, double lr);
/* One update of every trainable parameter from its grad. ER_OK or ER_RUNTIME. */
int optim_step(optimizer *o);
void optim_zero_grad(optimizer *o);
/* Global L2 norm of all gradients (sum of squares in double, like torch.nn.utils.clip_grad_norm_);
 * when max_norm > 0 and norm > max_norm, gradients are scaled by max_norm / (norm + 1e-6).
 * Returns the norm before clipping; a non-finite norm is returned as is and nothing is scaled
 * (the caller decides whether to skip the step). */
double optim_clip_grad_norm(optimizer *o, double max_norm);
/* optim_clip_grad_norm's check and clip without the host waiting for the device (the backend's
 * step_guard): on the gradients' device, *norm (double) gets the global norm and *gscale (float) the
 * clip coefficient (1 when not clipping), or NaN when the norm or any of the nl floats at `losses`
 * (device memory: the step's losses) is not finite. norm, gscale and losses are that device's memory
 * and must stay valid until the next optim_step, which reads gscale there: it scales every gradient
 * by it, or when it is NaN changes no parameter or moment (its step count still advances: the caller
 * stops training, as train/loop.c does). The gradients themselves are not scaled. ER_OK; 1 without
 * queueing anything when the gradients are not all on `device` (then use optim_clip_grad_norm). */
int optim_guard(optimizer *o, int device, double max_norm, const float *losses, int nl, double *norm, float *gscale);
/* The gradient memory of the trainable parameters, for the data-parallel all-reduce: each device's
 * flat gradient buffer whole (padding included, which stays zero), then every gradient outside
 * one. Fills g/n (room for optim_grad_buffers_max(o) entries) and returns the count. */
int optim_grad_buffers_max(const optimizer *o);
int optim_grad_buffers(const optimizer *o, float **g, int64_t *n);
/* Index of the parameter named `name`, or -1. */
int optim_find(const optimizer *o, const char *name);

#endif
