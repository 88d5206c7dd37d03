/* pooling.h — the descriptor of a ViT branch from its final-norm tokens (dual-backbone paper's
 * pooling ablation): the [CLS] token, the mean of the patch tokens, or GeM over the patch tokens
 * (register tokens and [CLS] excluded from both):
 *
 *   GeM: g_c = ( mean_n clamp(X_nc, eps)^p )^(1/p),  p a learnable scalar (init 3), eps 1e-6
 *
 * (Radenovic et al.; the reference declares GeM but never calls it, spec section 2.5.) Built from
 * differentiable ops (clamp, log, mul, exp, mean, div), so the gradient reaches X and p; the clamp
 * passes no gradient to X where X < eps (LayerNorm outputs are half negative: that information is
 * lost, as the spec notes). x^p is computed as exp(p log x), exact for x >= eps > 0. */
#ifndef ENDORET_POOLING_H
#define ENDORET_POOLING_H

#include "nn/tensor.h"

typedef enum { POOL_CLS = 0, POOL_GEM, POOL_MEAN } pool_kind;

/* "cls" | "gem" | "mean" -> kind; ER_INPUT naming `key` otherwise. */
int pool_parse(const char *s, const char *key, pool_kind *k);
const char *pool_name(pool_kind k);

/* x [B, N, C] -> [B, C]; p: a [1] tensor (may require grad). */
tensor *gem_pool(tensor *x, tensor *p, float eps);

/* tokens [B, T, C] (after the final norm: [CLS], `prefix - 1` registers, then patches) -> [B, C]. */
tensor *token_pool(pool_kind k, tensor *tokens, int prefix, tensor *p, float eps);

#endif
