/* sscd_head.h — SSCD's descriptor head on the [CLS] output (EF: Linear(1024, 512)), followed by
 * L2 normalisation; nn/losses/sscd.h trains it. */
#ifndef ENDORET_SSCD_HEAD_H
#define ENDORET_SSCD_HEAD_H

#include "nn/context.h"
#include "nn/tensor.h"

/* The descriptor head: "head.weight" [out, in], "head.bias" [out] (EF: Linear(1024, 512)). */
typedef struct {
    tensor *w, *b;
    int in, out;
} sscd_head;
void sscd_head_init(sscd_head *h, int in, int out, uint64_t seed, param_list *pl);
/* The same weights moved to `device`; ER_INPUT when it cannot be used. */
int sscd_head_init_on(int device, sscd_head *h, int in, int out, uint64_t seed, param_list *pl);
/* cls [N, in] -> L2-normalised descriptor [N, out] (out == 0: just normalise cls). */
tensor *sscd_descriptor(const sscd_head *h, const nn_ctx *ctx, tensor *cls);

#endif
