/* sscd_head.c — SSCD's descriptor head (projection + L2 normalisation). */
#include "nn/layers/sscd_head.h"

#include <string.h>

#include "nn/init.h"
#include "nn/ops.h"
#include "nn/base/rng.h"

void sscd_head_init(sscd_head *h, int in, int out, uint64_t seed, param_list *pl) {
    memset(h, 0, sizeof *h);
    h->in = in;
    h->out = out;
    if (out <= 0) return;
    h->w = tensor_param("head.weight", 2, SHAPE(out, in));
    params_add(pl, h->w);
    rng_t r = rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, 2));
    init_xavier_uniform(h->w->data, tensor_numel(h->w), in, out, 1.0f, &r);
    h->b = tensor_param("head.bias", 1, SHAPE(out));
    params_add(pl, h->b);
}

int sscd_head_init_on(int device, sscd_head *h, int in, int out, uint64_t seed, param_list *pl) {
    sscd_head_init(h, in, out, seed, pl);
    int rc = tensor_to_device(h->w, device);
    return rc ? rc : tensor_to_device(h->b, device);
}

tensor *sscd_descriptor(const sscd_head *h, const nn_ctx *ctx, tensor *cls) {
    (void)ctx; /* a linear layer: the same in training and eval */
    if (h && h->out > 0) cls = op_linear(cls, h->w, h->b);
    return op_l2_normalize(cls, -1, 1e-12f);
}
