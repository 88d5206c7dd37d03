/* autocast.h — the mixed-precision policy of a forward (issue #27), in one place.
 *
 * A forward's context says how it computes (nn_ctx.precision, set once by the training loop or,
 * for inference, by the model). Ops follow their operands' dtype: a product on a bf16 activation
 * computes in bf16 with fp32 accumulation, on an fp32 one in fp32. These helpers are the policy,
 * torch.autocast's rules made explicit: under bf16
 *   - products (linear, attention) read bf16 activations: ac_act casts an fp32 one once; conv2d
 *     keeps fp32 storage and computes in bf16 (ac_conv2d);
 *   - layernorm's output, qkv, attention's output and the MLP hidden stay bf16 between products
 *     (ac_layernorm, ac_linear_act, ac_attention): half the bytes saved for the backward;
 *   - the residual stream, norms' statistics, softmax statistics, reductions and whatever feeds a
 *     loss stay fp32 (ac_linear and ac_linear_add store fp32; losses never see a bf16 tensor).
 * Under fp32 each helper is exactly its op: fp32 runs are unchanged, bit for bit. */
#ifndef ENDORET_NN_AUTOCAST_H
#define ENDORET_NN_AUTOCAST_H

#include "nn/context.h"
#include "nn/ops.h"

/* The activation dtype of the context: DT_BF16 under bf16, DT_F32 otherwise. */
int ac_dtype(const nn_ctx *c);
/* x in the activation dtype (a cast when it differs; x itself otherwise). */
tensor *ac_act(const nn_ctx *c, tensor *x);
/* x in fp32 (a cast from bf16; x itself otherwise): for ops and losses that are fp32-only. */
tensor *ac_f32(tensor *x);

/* x W^T + b on ac_act(x), stored fp32 (for a head, a residual branch with layer scale, a loss). */
tensor *ac_linear(const nn_ctx *c, tensor *x, tensor *w, tensor *b);
/* the same, stored in the activation dtype (the input of the next product or bias+GELU) */
tensor *ac_linear_act(const nn_ctx *c, tensor *x, tensor *w, tensor *b);
/* res + x W^T + b on ac_act(x); res and the result fp32 (the residual stream). */
tensor *ac_linear_add(const nn_ctx *c, tensor *x, tensor *w, tensor *b, tensor *res);
/* layernorm of fp32 x (fp32 statistics), stored in the activation dtype. */
tensor *ac_layernorm(const nn_ctx *c, tensor *x, tensor *w, tensor *b, float eps);
/* attention on ac_act(q, k, v); the output in the activation dtype. */
tensor *ac_attention(const nn_ctx *c, tensor *q, tensor *k, tensor *v);
/* conv2d of fp32 x in the context's compute (its kernels round their own operands: no bf16 copy of
 * x, which batch norm and ReLU keep in fp32 anyway), stored fp32 (batch norm follows). */
tensor *ac_conv2d(const nn_ctx *c, tensor *x, tensor *w, tensor *b, int stride, int pad, int dilation, int groups);

#endif
