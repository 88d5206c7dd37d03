/* bnorm.c — batch normalisation over the channels of NCHW data (PyTorch BatchNorm2d semantics).
 * Channels run in parallel; each channel's sums go over its N planes in order, in double, so the
 * results do not depend on the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_batchnorm(int64_t N, int64_t C, int64_t HW, const float *x, const float *w,
                   const float *b, float *running_mean, float *running_var, int training,
                   float momentum, float eps, int relu, float *y, float *mean, float *rstd) {
    const int64_t M = N * HW, plane = C * HW;
    #pragma omp parallel for if (N * C * HW > CPU_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        float mu, rs;
        if (training) { /* two passes: mean, then the centred sum of squares */
            double s = 0;
            for (int64_t n = 0; n < N; n++) {
                const float *xc = x + n * plane + c * HW;
                #pragma omp simd reduction(+ : s)
                for (int64_t i = 0; i < HW; i++) s += xc[i];
            }
            double m = s / (double)M, v = 0;
            for (int64_t n = 0; n < N; n++) {
                const float *xc = x + n * plane + c * HW;
                #pragma omp simd reduction(+ : v)
                for (int64_t i = 0; i < HW; i++) v += (xc[i] - m) * (xc[i] - m);
            }
            double var = v / (double)M;
            mu = (float)m;
            rs = (float)(1.0 / sqrt(var + eps));
            if (running_mean)
                running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * m);
            if (running_var) /* unbiased, as torch; M == 1 is refused by the op */
                running_var[c] = (float)((1.0 - momentum) * running_var[c] +
                                         momentum * (M > 1 ? v / (double)(M - 1) : var));
        } else {
            mu = running_mean[c];
            rs = (float)(1.0 / sqrt((double)running_var[c] + eps));
        }
        mean[c] = mu;
        rstd[c] = rs;
        /* y = x * scale + shift: one multiply-add per element (also the eval-mode BN + ReLU path) */
        const float scale = rs * w[c], shift = b[c] - mu * scale;
        for (int64_t n = 0; n < N; n++) {
            const float *xc = x + n * plane + c * HW;
            float *yc = y + n * plane + c * HW;
            if (relu) {
                #pragma omp simd
                for (int64_t i = 0; i < HW; i++) {
                    float v = xc[i] * scale + shift;
                    yc[i] = v > 0.0f ? v : 0.0f;
                }
            } else {
                #pragma omp simd
                for (int64_t i = 0; i < HW; i++) yc[i] = xc[i] * scale + shift;
            }
        }
    }
}

/* With the fused ReLU, gy masked by its output in one long pass into `work` (N C HW floats) before the
 * per-channel loops: those run over short planes (7 x 7 in a ResNet's last stage), where a third
 * input stream in every plane cost 1.7x the unfused pair (measured); one long masking pass does not. */
size_t cpu_batchnorm_backward_workspace(int64_t N, int64_t C, int64_t HW, int relu) { return relu ? (size_t)(N * C * HW) : 0; }

/* With xh = (x - mean) * rstd, per channel: gb += sum gy, gw += sum gy xh, and
 *   training: gx += w rstd (gy - sum(gy) / M - xh sum(gy xh) / M)
 *   eval:     gx += w rstd gy
 * (gx = 0 + ... with gx_acc 0, gx not read). With the fused ReLU, gy is first replaced by
 * 0 + (relu_y > 0 ? gy : 0): the ReLU's backward into a fresh buffer (relu_y > 0 exactly where the BN
 * output was > 0), so the result is bit for bit the unfused ReLU backward + BN backward. */
void cpu_batchnorm_backward(int64_t N, int64_t C, int64_t HW, const float *x, const float *w,
                            const float *mean, const float *rstd, const float *gy, const float *relu_y,
                            int training, float eps, float *gx, float *gw, float *gb, float *work, int gx_acc) {
    const int64_t M = N * HW, plane = C * HW, n_all = N * C * HW;
    if (relu_y) {
        #pragma omp parallel for simd if (n_all > CPU_PAR_MIN)
        for (int64_t i = 0; i < n_all; i++) work[i] = 0.0f + (relu_y[i] > 0.0f ? gy[i] : 0.0f);
        gy = work;
    }
    #pragma omp parallel for if (N * C * HW > CPU_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        const float mu = mean[c], rs = rstd[c];
        double sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; n++) {
            const float *xc = x + n * plane + c * HW, *gc = gy + n * plane + c * HW;
            #pragma omp simd reduction(+ : sg, sgx)
            for (int64_t i = 0; i < HW; i++) {
                sg += gc[i];
                sgx += (double)gc[i] * ((xc[i] - mu) * rs);
            }
        }
        if (gb) gb[c] += (float)sg;
        if (gw) gw[c] += (float)sgx;
        if (!gx) continue;
        const float k = w[c] * rs;
        const float m1 = training ? (float)(sg / (double)M) : 0.0f;
        const float m2 = training ? (float)(sgx / (double)M) : 0.0f;
        for (int64_t n = 0; n < N; n++) {
            const float *xc = x + n * plane + c * HW, *gc = gy + n * plane + c * HW;
            float *o = gx + n * plane + c * HW;
            if (gx_acc) {
                #pragma omp simd
                for (int64_t i = 0; i < HW; i++) o[i] += k * (gc[i] - m1 - (xc[i] - mu) * rs * m2);
            } else {
                #pragma omp simd
                for (int64_t i = 0; i < HW; i++) o[i] = 0.0f + k * (gc[i] - m1 - (xc[i] - mu) * rs * m2);
            }
        }
    }
}
