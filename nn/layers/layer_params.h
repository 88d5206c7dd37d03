/* layer_params.h — how layers and models create their parameters: named tensors appended to one
 * param_list, each initialised from its own Philox stream. */
#ifndef ENDORET_LAYER_PARAMS_H
#define ENDORET_LAYER_PARAMS_H

#include <stdint.h>

#include "nn/base/rng.h"
#include "nn/tensor.h"

/* A trainable host tensor `name` (uninitialised), appended to pl. */
tensor *layer_param(param_list *pl, const char *name, int ndim, const int64_t *shape);
/* The init stream of the parameter(s) just appended: indexed by the list's length, so adding a
 * module elsewhere does not change these draws; `family` separates modules sharing one list
 * (0 = ViT encoder, 1 = MAE decoder, 2 = SSCD head). */
rng_t layer_param_rng(uint64_t seed, const param_list *pl, uint32_t family);
/* nn.Linear(in, out) with torch's default init: `<prefix>.weight` [out, in] and `<prefix>.bias` [out],
 * both U(-1/sqrt(in), 1/sqrt(in)), each from its own stream of `family`, appended to pl. */
void layer_linear(param_list *pl, const char *prefix, int out, int in, uint64_t seed, uint32_t family, tensor **w,
                  tensor **b);

#endif
