/* pool_nhwc.cu — max pooling and global average pooling of channels-last activations ([N, H, W, C],
 * fp32 or bf16 storage), forward and backward; mirrors kernels/cpu/pool_nhwc.c bit for bit (the same
 * comparisons, the same fp32 / double sums in the same order, one rounding per output).
 * One thread per output element with the channel innermost, so a warp reads 32 consecutive channels of
 * one pixel. The max-pool backward gathers (one thread per input element, over the few windows that
 * cover it): every gx element written once, in a fixed order, no atomics. */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define PN_THREADS 256

__global__ void k_maxpool_nhwc(pool2d_args a, int dt, const void *x, void *y, int32_t *argmax, int64_t n) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = o % a.C, pix = o / a.C;
        const int q = (int)(pix % a.Q), p = (int)(pix / a.Q % a.P);
        const int64_t img = pix / ((int64_t)a.P * a.Q) * a.H * a.W;
        const int h0 = p * a.sh - a.ph, w0 = q * a.sw - a.pw;
        const int r0 = h0 < 0 ? -h0 : 0, r1 = h0 + a.R > a.H ? a.H - h0 : a.R;
        const int s0 = w0 < 0 ? -w0 : 0, s1 = w0 + a.S > a.W ? a.W - w0 : a.S;
        float m = -INFINITY;
        int32_t am = -1;
        for (int r = r0; r < r1; r++)
            for (int s = s0; s < s1; s++) {
                const int32_t i = (h0 + r) * a.W + w0 + s;
                const float v = cu_load_f32(dt, x, (img + i) * a.C + c);
                if (v > m || isnan(v) || am < 0) { /* first max wins ties; NaN propagates */
                    m = v;
                    am = i;
                }
            }
        cu_store_f32(dt, y, o, m);
        argmax[o] = am;
    }
}

void cu_maxpool2d_nhwc(const pool2d_args *a, int dt, const void *x, void *y, int32_t *argmax) {
    const int64_t n = (int64_t)a->N * a->P * a->Q * a->C;
    if (n <= 0) return;
    k_maxpool_nhwc<<<cuda_blocks(n, PN_THREADS), PN_THREADS, 0, cuda_stream()>>>(*a, dt, x, y, argmax, n);
    CUDA_LAUNCHED("maxpool2d_nhwc");
}

/* Outputs [*lo, *hi] along one axis whose window (size k, stride st, padding pd) covers input i. */
__device__ inline void pn_covering(int i, int k, int st, int pd, int out, int *lo, int *hi) {
    const int a = i + pd - k + 1;
    *lo = a <= 0 ? 0 : (a + st - 1) / st;
    *hi = (i + pd) / st;
    if (*hi > out - 1) *hi = out - 1;
}

__global__ void k_maxpool_nhwc_bwd(pool2d_args a, int dt, const void *gy, const int32_t *argmax, void *gx, int gx_acc,
                                   int64_t n) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = e % a.C, pix = e / a.C;
        const int iw = (int)(pix % a.W), ih = (int)(pix / a.W % a.H);
        const int64_t img = pix / ((int64_t)a.H * a.W);
        const int32_t idx = ih * a.W + iw;
        int p0, p1, q0, q1;
        pn_covering(ih, a.R, a.sh, a.ph, a.P, &p0, &p1);
        pn_covering(iw, a.S, a.sw, a.pw, a.Q, &q0, &q1);
        float s = 0.0f;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++) {
                const int64_t o = ((img * a.P + p) * a.Q + q) * a.C + c;
                if (argmax[o] == idx) s += cu_load_f32(dt, gy, o);
            }
        cu_store_f32(dt, gx, e, gx_acc ? cu_load_f32(dt, gx, e) + s : s);
    }
}

void cu_maxpool2d_nhwc_backward(const pool2d_args *a, int dt, const void *gy, const int32_t *argmax, void *gx,
                                int gx_acc) {
    const int64_t n = (int64_t)a->N * a->H * a->W * a->C;
    if (n <= 0) return;
    k_maxpool_nhwc_bwd<<<cuda_blocks(n, PN_THREADS), PN_THREADS, 0, cuda_stream()>>>(*a, dt, gy, argmax, gx, gx_acc, n);
    CUDA_LAUNCHED("maxpool2d_nhwc_backward");
}

/* y[n, c]: a double sum over the HW pixels in order (adjacent threads read adjacent channels) */
__global__ void k_avgpool_nhwc(int64_t N, int64_t HW, int64_t C, int dt, const void *x, float *y) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < N * C; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t n = o / C, c = o % C;
        double s = 0;
        for (int64_t i = 0; i < HW; i++) s += cu_load_f32(dt, x, (n * HW + i) * C + c);
        y[o] = (float)(s / (double)HW);
    }
}

void cu_avgpool_nhwc(int64_t N, int64_t HW, int64_t C, int dt, const void *x, float *y) {
    if (N * C <= 0) return;
    k_avgpool_nhwc<<<cuda_blocks(N * C, PN_THREADS), PN_THREADS, 0, cuda_stream()>>>(N, HW, C, dt, x, y);
    CUDA_LAUNCHED("avgpool_nhwc");
}

__global__ void k_avgpool_nhwc_bwd(int64_t N, int64_t HW, int64_t C, int dt, const float *gy, void *gx, int gx_acc) {
    const int64_t n_all = N * HW * C;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n_all; e += (int64_t)gridDim.x * blockDim.x) {
        const float v = gy[e / (HW * C) * C + e % C] / (float)HW;
        cu_store_f32(dt, gx, e, gx_acc ? cu_load_f32(dt, gx, e) + v : v);
    }
}

void cu_avgpool_nhwc_backward(int64_t N, int64_t HW, int64_t C, int dt, const float *gy, void *gx, int gx_acc) {
    const int64_t n = N * HW * C;
    if (n <= 0) return;
    k_avgpool_nhwc_bwd<<<cuda_blocks(n, PN_THREADS), PN_THREADS, 0, cuda_stream()>>>(N, HW, C, dt, gy, gx, gx_acc);
    CUDA_LAUNCHED("avgpool_nhwc_backward");
}
