/* sscd_head.c — SSCD's descriptor head (projection + L2 normalisation). */
#include "nn/layers/sscd_head.h"

#include <string.h>

#include "nn/init.h"
#include "nn/layers/autocast.h"
#include "nn/layers/layer_params.h"
#include "nn/ops.h"

void sscd_head_init(sscd_head *h, int in, int out, uint64_t seed, param_list *pl) {
    memset(h, 0, sizeof *h);
    h->in = in;
    h->out = out;
    if (out <= 0) return;
    h->w = layer_param(pl, "head.weight", 2, SHAPE(out, in));
    rng_t r = layer_param_rng(seed, pl, 2);
    init_xavier_uniform(h->w->data, tensor_numel(h->w), in, out, 1.0f, &r);
    h->b = layer_param(pl, "head.bias", 1, SHAPE(out));
}

int sscd_head_init_on(int device, sscd_head *h, int in, int out, uint64_t seed, param_list *pl) {
    sscd_head_init(h, in, out, seed, pl);
    int rc = tensor_to_device(h->w, device);
    return rc ? rc : tensor_to_device(h->b, device);
}

tensor *sscd_descriptor(const sscd_head *h, const nn_ctx *ctx, tensor *cls) {
    /* ctx: the autocast scope only (a linear layer: the same in training and eval) */
    if (h && h->out > 0) cls = ac_linear(ctx, cls, h->w, h->b);
    return op_l2_normalize(cls, -1, 1e-12f);
}
