/* layer_params.c — named parameters and their init streams. */
#include "nn/layers/layer_params.h"

tensor *layer_param(param_list *pl, const char *name, int ndim, const int64_t *shape) {
    tensor *t = tensor_param(name, ndim, shape);
    params_add(pl, t);
    return t;
}

rng_t layer_param_rng(uint64_t seed, const param_list *pl, uint32_t family) {
    return rng_make(seed, rng_stream(RNG_INIT, (uint32_t)pl->n, family));
}
