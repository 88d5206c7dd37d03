/* layer_params.c — named parameters and their init streams. */
#include "nn/layers/layer_params.h"

#include <math.h>
#include <stdio.h>

#include "nn/init.h"

tensor *layer_param(param_list *pl, const char *name, int ndim, const int64_t *shape) {
    tensor *t = tensor_param(name, ndim, shape);
    params_add(pl, t);
    return t;
}

rng_t layer_param_rng(uint64_t seed, const param_list *pl, uint32_t family) {
    return rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, family));
}

void layer_linear(param_list *pl, const char *prefix, int out, int in, uint64_t seed, uint32_t family, tensor **w,
                  tensor **b) {
    char name[96];
    float bound = 1.0f / sqrtf((float)in);
    snprintf(name, sizeof name, "%s.weight", prefix);
    *w = layer_param(pl, name, 2, SHAPE(out, in));
    rng_t g = layer_param_rng(seed, pl, family);
    init_uniform((*w)->data, tensor_numel(*w), -bound, bound, &g);
    snprintf(name, sizeof name, "%s.bias", prefix);
    *b = layer_param(pl, name, 1, SHAPE(out));
    g = layer_param_rng(seed, pl, family);
    init_uniform((*b)->data, out, -bound, bound, &g);
}
