/* init.h — parameter initialisers used by timm / MAE, on raw float arrays.
 *
 * Random initialisers draw from a Philox stream (nn/base/rng.h): element i of a call uses the
 * generator's values index+2i and index+2i+1 (one 53-bit uniform), then the generator moves on by
 * 2n. So the result is a pure function of (seed, stream, index), does not depend on the thread
 * count, and the CUDA backend can compute any element on its own. A model builder typically uses
 * one generator per parameter: rng_make(seed, rng_stream(RNG_INIT, param_index, 0)).
 *
 * The draws match timm's distributions, not its bits (PyTorch's generator is a different one). */
#ifndef ENDORET_INIT_H
#define ENDORET_INIT_H

#include <stdint.h>

#include "nn/base/rng.h"

/* Normal(mean, std) truncated to [a, b] (absolute bounds, as timm.layers.trunc_normal_; timm's
 * defaults are a=-2, b=2, i.e. for std=0.02 practically untruncated). Sampled by the inverse CDF
 * on a uniform in [Phi(a'), Phi(b')] as timm does, so every element costs one draw. std > 0, a < b. */
void init_trunc_normal(float *x, int64_t n, float mean, float std, float a, float b, rng_t *r);
/* Same with bounds in units of std around the mean: [mean - k*std, mean + k*std]
 * (timm's trunc_normal_tf_ convention; k=2 gives the "+-2 std" truncation). */
void init_trunc_normal_std(float *x, int64_t n, float mean, float std, float k, rng_t *r);
/* Uniform on [lo, hi). */
void init_uniform(float *x, int64_t n, float lo, float hi, rng_t *r);
/* Normal(mean, std), untruncated. */
void init_normal(float *x, int64_t n, float mean, float std, rng_t *r);
/* torch.nn.init.xavier_uniform_: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
 * For a Linear weight [out, in]: fan_in = in, fan_out = out. MAE initialises the patch-embedding
 * conv as a Linear on its [out, in*kh*kw] view: fan_in = in*kh*kw, fan_out = out. */
void init_xavier_uniform(float *x, int64_t n, int64_t fan_in, int64_t fan_out, float gain, rng_t *r);
void init_constant(float *x, int64_t n, float value);
void init_zeros(float *x, int64_t n);
void init_ones(float *x, int64_t n);

/* MAE's get_2d_sincos_pos_embed (util/pos_embed.py) for a grid of gh rows x gw columns, written
 * into out[(cls_token + gh*gw) * dim] (row-major, one row per token). With cls_token, row 0 is all
 * zeros. Token k = i*gw + j (row i, column j); its first dim/2 values encode the column j, the
 * last dim/2 the row i, each half as [sin(pos*w_0..w_{D/4-1}), cos(pos*w_0..)] with
 * w_d = 10000^(-d/(dim/4)). Computed in double, stored as float (as MAE's .float()).
 * dim must be a multiple of 4: returns ER_INPUT otherwise. */
int init_sincos_pos_embed_2d(float *out, int dim, int gh, int gw, int cls_token);

/* The inverse of the standard normal CDF, accurate to ~1e-15 on (0, 1). Exposed for tests. */
double normal_icdf(double p);

#endif
