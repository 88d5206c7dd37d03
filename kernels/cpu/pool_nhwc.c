/* pool_nhwc.c — max pooling and global average pooling of channels-last activations ([N, H, W, C],
 * storage ER_F32 or ER_BF16): the references of maxpool2d_nhwc and avgpool_nhwc. Per channel the
 * arithmetic is pool.c's on NCHW planes (window order, the first maximum, a NaN wins; double sums
 * for the mean); bf16 values are widened exactly and outputs rounded once.
 * The max-pool backward gathers: each input element sums the gradients of the (at most
 * ceil(R / sh) * ceil(S / sw)) windows that chose it, so every gx element is written once. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dtype.h"

void cpu_maxpool2d_nhwc(const pool2d_args *a, int dt, const void *x, void *y, int32_t *argmax) {
    const int64_t C = a->C, outs = (int64_t)a->N * a->P * a->Q;
    #pragma omp parallel for if (outs * C * a->R * a->S > CPU_PAR_MIN)
    for (int64_t o = 0; o < outs; o++) {
        const int q = (int)(o % a->Q), p = (int)(o / a->Q % a->P);
        const int64_t n = o / ((int64_t)a->P * a->Q);
        const int h0 = p * a->sh - a->ph, w0 = q * a->sw - a->pw;
        const int r0 = h0 < 0 ? -h0 : 0, r1 = h0 + a->R > a->H ? a->H - h0 : a->R;
        const int s0 = w0 < 0 ? -w0 : 0, s1 = w0 + a->S > a->W ? a->W - w0 : a->S;
        /* channel outer: the window's pixels (R S C values) stay in cache across the channels */
        for (int64_t c = 0; c < C; c++) {
            float m = -INFINITY;
            int32_t am = -1;
            for (int r = r0; r < r1; r++)
                for (int s = s0; s < s1; s++) {
                    const int32_t i = (h0 + r) * a->W + w0 + s;
                    const float v = er_load_f32(dt, x, (n * a->H * a->W + i) * C + c);
                    if (v > m || isnan(v) || am < 0) { /* strict: the first max wins ties */
                        m = v;
                        am = i;
                    }
                }
            er_store_f32(dt, y, o * C + c, m);
            argmax[o * C + c] = am;
        }
    }
}

/* Outputs [*lo, *hi] along one axis whose window (stride st, pad pd, size k) covers input i. */
static inline void covering(int i, int k, int st, int pd, int out, int *lo, int *hi) {
    const int a = i + pd - k + 1;
    *lo = a <= 0 ? 0 : (a + st - 1) / st;
    *hi = (i + pd) / st;
    if (*hi > out - 1) *hi = out - 1;
}

void cpu_maxpool2d_nhwc_backward(const pool2d_args *a, int dt, const void *gy, const int32_t *argmax,
                                 void *gx, int gx_acc) {
    const int64_t C = a->C, ins = (int64_t)a->N * a->H * a->W;
    #pragma omp parallel for if (ins * C > CPU_PAR_MIN)
    for (int64_t e = 0; e < ins; e++) {
        const int iw = (int)(e % a->W), ih = (int)(e / a->W % a->H);
        const int64_t n = e / ((int64_t)a->H * a->W);
        const int32_t idx = ih * a->W + iw;
        int p0, p1, q0, q1;
        covering(ih, a->R, a->sh, a->ph, a->P, &p0, &p1);
        covering(iw, a->S, a->sw, a->pw, a->Q, &q0, &q1);
        for (int64_t c = 0; c < C; c++) {
            float s = 0.0f; /* fp32, windows in order (p, then q), rounded once below */
            for (int p = p0; p <= p1; p++)
                for (int q = q0; q <= q1; q++) {
                    const int64_t o = ((n * a->P + p) * a->Q + q) * C + c;
                    if (argmax[o] == idx) s += er_load_f32(dt, gy, o);
                }
            er_store_f32(dt, gx, e * C + c, gx_acc ? er_load_f32(dt, gx, e * C + c) + s : s);
        }
    }
}

void cpu_avgpool_nhwc(int64_t N, int64_t HW, int64_t C, int dt, const void *x, float *y) {
    #pragma omp parallel for collapse(2) if (N * HW * C > CPU_PAR_MIN)
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0; /* as adaptive_avgpool2d's global window: a double sum, one division */
            for (int64_t i = 0; i < HW; i++) s += er_load_f32(dt, x, (n * HW + i) * C + c);
            y[n * C + c] = (float)(s / (double)HW);
        }
}

void cpu_avgpool_nhwc_backward(int64_t N, int64_t HW, int64_t C, int dt, const float *gy, void *gx, int gx_acc) {
    #pragma omp parallel for if (N * HW * C > CPU_PAR_MIN)
    for (int64_t r = 0; r < N * HW; r++) {
        const float *g = gy + r / HW * C;
        for (int64_t c = 0; c < C; c++) {
            const float v = g[c] / (float)HW;
            er_store_f32(dt, gx, r * C + c, gx_acc ? er_load_f32(dt, gx, r * C + c) + v : v);
        }
    }
}
