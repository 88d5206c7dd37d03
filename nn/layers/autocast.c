/* autocast.c — the mixed-precision policy (autocast.h). */
#include "nn/layers/autocast.h"

#include "nn/precision.h"

int ac_dtype(const nn_ctx *c) { return c && c->precision == ER_PREC_BF16 ? DT_BF16 : DT_F32; }

tensor *ac_act(const nn_ctx *c, tensor *x) {
    return x && x->dtype != ac_dtype(c) ? op_cast(x, ac_dtype(c)) : x;
}

tensor *ac_f32(tensor *x) { return x && x->dtype != DT_F32 ? op_cast(x, DT_F32) : x; }

tensor *ac_linear(const nn_ctx *c, tensor *x, tensor *w, tensor *b) { return op_linear_to(ac_act(c, x), w, b, DT_F32); }

tensor *ac_linear_act(const nn_ctx *c, tensor *x, tensor *w, tensor *b) { return op_linear(ac_act(c, x), w, b); }

tensor *ac_linear_add(const nn_ctx *c, tensor *x, tensor *w, tensor *b, tensor *res) {
    return op_linear_add(ac_act(c, x), w, b, res);
}

tensor *ac_layernorm(const nn_ctx *c, tensor *x, tensor *w, tensor *b, float eps) {
    return op_layernorm_to(x, w, b, eps, ac_dtype(c));
}

tensor *ac_attention(const nn_ctx *c, tensor *q, tensor *k, tensor *v) {
    return op_attention(ac_act(c, q), ac_act(c, k), ac_act(c, v), NULL, MASK_NONE, 0.0f);
}

tensor *ac_conv2d(const nn_ctx *c, tensor *x, tensor *w, tensor *b, int stride, int pad, int dilation, int groups) {
    const int s[2] = {stride, stride}, p[2] = {pad, pad}, d[2] = {dilation, dilation};
    return op_conv2d_ex(ac_f32(x), w, b, s, p, d, groups, er_gemm_compute_of(c ? c->precision : ER_PREC_FP32));
}
