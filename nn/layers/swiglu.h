/* swiglu.h — the SwiGLU gate of DINOv2 ViT-g's FFN (Meta's SwiGLUFFN(Fused), timm's SwiGLUPacked, Hugging
 * Face's Dinov2SwiGLUFFN): the packed projection h = w12(x) [..., 2H] is split in two halves
 * x1 = h[..., :H], x2 = h[..., H:] and gated, silu(x1) * x2 with silu(a) = a * sigmoid(a); w3 follows.
 * A composition of differentiable ops (slice, sigmoid, mul), so its backward is theirs; tested against a
 * naive loop and finite differences (tests/nn/layers/test_swiglu.c). */
#ifndef ENDORET_SWIGLU_H
#define ENDORET_SWIGLU_H

#include "nn/tensor.h"

/* h [..., 2H] -> [..., H]. NULL + ER_INPUT when the last dim is odd (or h is NULL). */
tensor *swiglu_gate(tensor *h);

#endif
