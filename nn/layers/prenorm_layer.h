/* prenorm_layer.h — one layer of the small pre-norm transformer EndoFinder-Scene builds its scene
 * encoder and its scene-aware decoder from (the vit-pytorch "Transformer" of EFS models/layers.py):
 *
 *   x += to_out(Attn(LN1(x), kv))        kv = LN1(x) (self-attention) or z (cross-attention: the
 *                                         keys/values come from another sequence, NOT normalised)
 *   x += net.3(GELU(net.0(LN2(x))))
 *
 * Attention: `heads` heads of `dim_head` (inner = heads * dim_head, which need not equal dim), scale
 * dim_head^-0.5, q/k/v projections without bias, to_out with bias; LayerNorm eps as given (PyTorch's
 * default 1e-5 there). Tensor names under `prefix` (e.g. "scene_transform.layers.0"), as the
 * reference's state dict:
 *   <prefix>.0.norm.{weight,bias}       <prefix>.0.fn.to_qkv.weight [3 inner, dim]      (self)
 *                                       <prefix>.0.fn.to_q.weight [inner, dim],
 *                                       <prefix>.0.fn.to_kv.weight [2 inner, kv_dim]    (cross)
 *   <prefix>.0.fn.to_out.0.{weight [dim, inner], bias}
 *   <prefix>.1.norm.{weight,bias}       <prefix>.1.fn.net.0.{weight [mlp, dim], bias}
 *                                       <prefix>.1.fn.net.3.{weight [dim, mlp], bias}
 * Init as EFS: xavier-uniform linears, zero biases, unit LayerNorms. */
#ifndef ENDORET_PRENORM_LAYER_H
#define ENDORET_PRENORM_LAYER_H

#include <stdint.h>

#include "nn/context.h"
#include "nn/tensor.h"

typedef struct {
    int dim, heads, dim_head, mlp, kv_dim;  /* kv_dim 0: self-attention */
    float eps;
    tensor *n1_w, *n1_b, *qkv_w, *q_w, *kv_w, *out_w, *out_b;
    tensor *n2_w, *n2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} prenorm_layer;

/* Creates the layer's parameters (host), appended to pl; `family` separates init streams of
 * modules sharing one list (nn/layers/layer_params.h). */
void prenorm_layer_init(prenorm_layer *l, const char *prefix, int dim, int heads, int dim_head, int mlp, int kv_dim,
                        float eps, uint64_t seed, uint32_t family, param_list *pl);
/* x [B, T, dim] -> [B, T, dim]; z: NULL (self-attention) or [B, Tk, kv_dim] (cross-attention). */
tensor *prenorm_layer_forward(const prenorm_layer *l, const nn_ctx *ctx, tensor *x, tensor *z);
/* Parameters of one layer (for memory estimates). */
double prenorm_layer_param_count(int dim, int heads, int dim_head, int mlp, int kv_dim);

#endif
