/* lora.h — a LoRA adapter on one frozen linear (or patch-embedding conv), PEFT semantics
 * (peft.tuners.lora.Linear / Conv2d):
 *
 *   y = W x + b + s * B (A dropout(x)),   s = alpha / r
 *
 * A [r, in] Kaiming-uniform with a = sqrt(5) (U(-1/sqrt(in), 1/sqrt(in)), torch's nn.Linear
 * default, which PEFT keeps), B [out, r] zeros: a fresh adapter leaves the network's function
 * unchanged. Dropout (inverted, Philox) acts on the adapter's input only and only in training.
 * For PEFT's Conv2d case (patch_embed.proj, kernel = stride = patch) A is stored as the conv
 * weight [r, C, p, p] and B as [out, r, 1, 1]; on patchified input [.., C*p*p] that conv is
 * exactly the linear with A viewed as [r, C*p*p], so one code path serves both.
 *
 * Tensor names follow PEFT's module paths: "<base>.lora_A.weight", "<base>.lora_B.weight" where
 * <base> is the adapted module ("blocks.0.attn.qkv"); adapter files add "base_model.model."
 * (nn/models/vit_lora.h). */
#ifndef ENDORET_LORA_H
#define ENDORET_LORA_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/tensor.h"

typedef struct {
    int r;
    double alpha;      /* scale = alpha / r */
    double dropout;    /* on the adapter input, [0, 1) */
} lora_config;

/* PEFT's values of the dual-backbone paper: r 8, alpha 16, dropout 0.05. */
static inline lora_config lora_config_default(void) { return (lora_config){8, 16.0, 0.05}; }

typedef struct lora {
    tensor *A, *B;     /* A [r, in] or [r, C, p, p]; B [out, r] or [out, r, 1, 1] */
    int64_t in, out;
    int r;
    float scale;       /* alpha / r */
    float dropout;
    uint32_t id;       /* which adapter of the model: its dropout stream */
} lora;

/* Creates A and B for the module `base` (out x in) and appends them to pl: A Kaiming-uniform(a=sqrt 5)
 * from its own Philox stream, B zero. conv_c > 0: conv shapes (A [r, conv_c, conv_k, conv_k] with
 * in = conv_c conv_k^2, B [out, r, 1, 1]). */
void lora_init(lora *l, const char *base, int64_t in, int64_t out, int conv_c, int conv_k, const lora_config *c,
               uint32_t id, uint64_t seed, param_list *pl);

/* x [.., in] (fp32 or bf16) -> s * B (A dropout(x)) [.., out], fp32 (its products under ctx's autocast).
 * Dropout draws: Philox (ctx->seed, stream of (ctx->step, ctx->micro, id)), so a resumed run draws
 * the same masks. */
tensor *lora_delta(const lora *l, const nn_ctx *ctx, tensor *x);

/* W x + b, plus the adapter when l is not NULL: the one call a layer makes per adaptable linear.
 * x fp32 or bf16; the result fp32 (autocast.h's ac_linear). */
tensor *lora_linear(const lora *l, const nn_ctx *ctx, tensor *x, tensor *w, tensor *b);

/* W [out, in] += s * B [out, r] A [r, in] on host arrays, each element summed in double (the merge
 * used on export and by lora_merge_files). */
void lora_merge_host(float *W, const float *A, const float *B, int64_t out, int64_t in, int r, double s);

#endif
