/* context.h — the layer convention: every model/layer forward takes a `const nn_ctx *`.
 *
 * A forward's behaviour may depend on whether it trains (dropout, drop-path, batch norm with batch
 * statistics and running-stat updates) and on where in training it is (random draws are pure
 * functions of (seed, step, micro, layer), so a resumed run draws the same numbers). Inference
 * passes NN_EVAL (or a context with training = 0): running statistics, no dropout, nothing random.
 *
 * Non-trainable state that a layer owns (batch-norm running mean/var, memory banks, EMA weights)
 * lives in the model's param_list as tensors WITHOUT T_REQUIRES_GRAD: checkpoints save and
 * --resume restores every tensor of the list, and optimizers touch only T_REQUIRES_GRAD ones. */
#ifndef ENDORET_NN_CONTEXT_H
#define ENDORET_NN_CONTEXT_H

#include <stdint.h>

typedef struct nn_ctx {
    int training;    /* 1: training mode (dropout, drop-path, batch statistics); 0: eval */
    uint64_t seed;   /* run seed (train.seed) */
    int64_t step;    /* optimizer step */
    int micro;       /* micro-batch within the step (gradient accumulation) */
    int precision;   /* ER_PREC_FP32 | ER_PREC_BF16 (nn/precision.h): the autocast scope of the
                      * forward (nn/layers/autocast.h); ops themselves follow their operands' dtype */
} nn_ctx;

/* The eval context: no randomness, running statistics, fp32. */
static const nn_ctx NN_EVAL = {0, 0, 0, 0, 0};

static inline nn_ctx nn_ctx_train(uint64_t seed, int64_t step, int micro, int precision) {
    nn_ctx c = {1, seed, step, micro, precision};
    return c;
}

/* An eval context in the given precision (embed, serve, benchmarks). */
static inline nn_ctx nn_ctx_eval(int precision) {
    nn_ctx c = {0, 0, 0, 0, precision};
    return c;
}

#endif
