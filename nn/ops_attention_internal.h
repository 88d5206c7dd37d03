/* ops_attention_internal.h — what ops_attention.c and ops_attention_bf16.c share; the attention
 * tests read the saved lse through attn_ctx. */
#ifndef ENDORET_OPS_ATTENTION_INTERNAL_H
#define ENDORET_OPS_ATTENTION_INTERNAL_H

#include "nn/autograd.h"
#include "nn/tensor.h"

/* the tape node's ctx */
typedef struct {
    tensor *mask;
    int mask_kind;
    int64_t ms[4];
    float *lse;  /* [B * H * Tq] fp32, whatever q's dtype */
    int compute; /* GEMM_COMPUTE_* of the forward: the backward uses the same path */
} attn_ctx;

/* (b, h, t) strides; a size-1 token dim gets the packed stride so gemm's leading dim is valid. */
static inline void attn_strides3(const tensor *t, int64_t *s) {
    s[0] = t->stride[0];
    s[1] = t->stride[1];
    s[2] = t->shape[2] == 1 ? t->shape[3] : t->stride[2];
}

/* Where to add x's gradient (ops_attention.c): straight into the gradient of the packed base that x
 * is a pure view of (q, k, v sliced out of one qkv projection; *went = 1, s = x's own strides), or
 * x's own packed gradient buffer (*went = 0, s its strides); NULL when x needs none. `direct`: the
 * operands already sent to a base, which x may not overlap. Any dtype (the pointer is raw). fresh
 * NULL: every buffer is initialised (zero-filled when new). fresh given: a base gradient made by
 * this call is left uninitialised, *fresh = 1, and *base_out = the base (NULL when x did not go to
 * one): the caller then writes all of it or fills it. */
void *attn_grad_dest(tensor *x, int64_t *s, tensor *const *direct, int ndirect, int *went, tensor **base_out,
                     int *fresh);

/* bf16 q, k, v (ops_attention_bf16.c): o (bf16, [B, H, Tq, D] over dense storage) and c->lse from
 * the fp32-storage kernel on widened copies, `work` its workspace; and the tape node's backward. */
void attention_bf16_forward(const attn_ctx *c, int B, int H, int Tq, int Tk, int D, float scale, const tensor *q,
                            const tensor *k, const tensor *v, tensor *o, float *work);
void attention_bf16_backward(tape_node *n);

#endif
