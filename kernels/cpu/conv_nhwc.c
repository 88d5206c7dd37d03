/* conv_nhwc.c — channels-last convolution (x [N, H, W, C], y [N, P, Q, K], storage fp32 or bf16)
 * as the reference for kernels/cuda/conv_nhwc.cu: readable, not fast. Each call widens its
 * inputs and transposes them to NCHW fp32 in `work`, runs the NCHW kernels of conv.c there, and
 * transposes back, storing a bf16 result with one rounding (kernels/dtype.h). With dt fp32 the
 * results are those of cpu_conv2d(_backward) on transposed data, bit for bit.
 *
 * A bf16 call computes with GEMM_COMPUTE_BF16 whatever a->compute says: its weights are rounded
 * to bf16 as the device rounds them (kernels/cuda/conv_nhwc.cu converts w to a bf16 copy). */
#include "kernels/cpu/cpu_kernels.h"

/* The NCHW kernels' arguments: the same geometry, products in bf16 for bf16 storage. */
static conv2d_args nchw_args(const conv2d_args *a, int dt) {
    conv2d_args b = *a;
    if (dt == ER_BF16) b.compute = GEMM_COMPUTE_BF16;
    return b;
}

static int64_t nx(const conv2d_args *a) { return (int64_t)a->N * a->C * a->H * a->W; }
static int64_t ny(const conv2d_args *a) { return (int64_t)a->N * a->K * a->P * a->Q; }
static int64_t nw(const conv2d_args *a) { return (int64_t)a->K * (a->C / a->groups) * a->R * a->S; }

/* dst [N, C, HW] fp32 = widen(src [N, HW, C] of dt) */
static void to_nchw(int dt, const void *src, int64_t N, int64_t C, int64_t HW, float *dst) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < HW; i++) dst[(n * C + c) * HW + i] = er_load_f32(dt, src, (n * HW + i) * C + c);
}

/* dst [N, HW, C] of dt = round(src [N, C, HW]), or round(dst + src) when acc */
static void to_nhwc(int dt, const float *src, int64_t N, int64_t C, int64_t HW, void *dst, int acc) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < HW; i++)
            for (int64_t c = 0; c < C; c++) {
                int64_t o = (n * HW + i) * C + c;
                float v = src[(n * C + c) * HW + i];
                er_store_f32(dt, dst, o, acc ? er_load_f32(dt, dst, o) + v : v);
            }
}

/* work: x^T [nx], y^T [ny], then cpu_conv2d's scratch */
size_t cpu_conv2d_nhwc_workspace(const conv2d_args *a, int dt) {
    conv2d_args b = nchw_args(a, dt);
    return (size_t)(nx(a) + ny(a)) + cpu_conv2d_workspace(&b);
}

void cpu_conv2d_nhwc(const conv2d_args *a, int dt, const void *x, const float *w, void *y, float *work) {
    conv2d_args b = nchw_args(a, dt);
    float *xt = work, *yt = xt + nx(a);
    to_nchw(dt, x, a->N, a->C, (int64_t)a->H * a->W, xt);
    cpu_conv2d(&b, xt, w, NULL, yt, yt + ny(a));
    to_nhwc(dt, yt, a->N, a->K, (int64_t)a->P * a->Q, y, 0);
}

/* work: x^T [nx], gy^T [ny], gx^T [nx], dw [nw], then cpu_conv2d_backward's scratch */
size_t cpu_conv2d_nhwc_backward_workspace(const conv2d_args *a, int dt) {
    conv2d_args b = nchw_args(a, dt);
    return (size_t)(2 * nx(a) + ny(a) + nw(a)) + cpu_conv2d_backward_workspace(&b);
}

void cpu_conv2d_nhwc_backward(const conv2d_args *a, int dt, const void *x, const float *w, const void *gy,
                              void *gx, float *gw, float *work, int gx_acc) {
    conv2d_args b = nchw_args(a, dt);
    float *xt = work, *gyt = xt + nx(a), *gxt = gyt + ny(a), *dw = gxt + nx(a), *rest = dw + nw(a);
    if (gw) to_nchw(dt, x, a->N, a->C, (int64_t)a->H * a->W, xt);
    to_nchw(dt, gy, a->N, a->K, (int64_t)a->P * a->Q, gyt);
    if (gw) memset(dw, 0, (size_t)nw(a) * sizeof(float));
    cpu_conv2d_backward(&b, xt, w, gyt, gx ? gxt : NULL, gw ? dw : NULL, NULL, rest, 0);
    if (gx) to_nhwc(dt, gxt, a->N, a->C, (int64_t)a->H * a->W, gx, gx_acc);
    if (gw) /* the filter gradient in x's type (as cuDNN writes it), added to the fp32 master gradient */
        for (int64_t i = 0; i < nw(a); i++) gw[i] += dt == ER_BF16 ? er_bf16_to_f32(er_f32_to_bf16(dw[i])) : dw[i];
}
