/* norm.c — layer normalisation over the last axis (two-pass mean/variance in double). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_layernorm(int64_t rows, int64_t cols, const float *x, const float *w, const float *b,
                   float eps, float *y, float *mean, float *rstd) {
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double s = 0;
        #pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < cols; j++) s += xr[j];
        float mu = (float)(s / (double)cols);
        double v = 0;
        #pragma omp simd reduction(+ : v)
        for (int64_t j = 0; j < cols; j++) {
            double d = xr[j] - mu;
            v += d * d;
        }
        float rs = (float)(1.0 / sqrt(v / (double)cols + eps));
        mean[r] = mu;
        rstd[r] = rs;
        float *yr = y + r * cols;
        if (w && b) {
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
        } else {
            for (int64_t j = 0; j < cols; j++)
                yr[j] = (xr[j] - mu) * rs * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f);
        }
    }
}

/* gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * w;
 * gw += sum_r gy * xhat, gb += sum_r gy (column blocks, rows walked in order: unit stride). */
void cpu_layernorm_backward(int64_t rows, int64_t cols, const float *x, const float *w,
                            const float *mean, const float *rstd, const float *gy, float *gx,
                            float *gw, float *gb) {
    if (gx) {
        #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols, *gr = gy + r * cols;
            float mu = mean[r], rs = rstd[r];
            double s1 = 0, s2 = 0;
            for (int64_t j = 0; j < cols; j++) {
                float g = gr[j] * (w ? w[j] : 1.0f);
                float xh = (xr[j] - mu) * rs;
                s1 += g;
                s2 += (double)g * xh;
            }
            float m1 = (float)(s1 / (double)cols), m2 = (float)(s2 / (double)cols);
            float *o = gx + r * cols;
            for (int64_t j = 0; j < cols; j++) {
                float g = gr[j] * (w ? w[j] : 1.0f);
                float xh = (xr[j] - mu) * rs;
                o[j] += rs * (g - m1 - xh * m2);
            }
        }
    }
    if (!gw && !gb) return;
    const int64_t CB = 64;
    int64_t nb = (cols + CB - 1) / CB;
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t bk = 0; bk < nb; bk++) {
        int64_t c0 = bk * CB, cl = cols - c0 < CB ? cols - c0 : CB;
        double aw[64] = {0}, ab[64] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols + c0, *gr = gy + r * cols + c0;
            float mu = mean[r], rs = rstd[r];
            for (int64_t c = 0; c < cl; c++) {
                aw[c] += (double)gr[c] * ((xr[c] - mu) * rs);
                ab[c] += gr[c];
            }
        }
        for (int64_t c = 0; c < cl; c++) {
            if (gw) gw[c0 + c] += (float)aw[c];
            if (gb) gb[c0 + c] += (float)ab[c];
        }
    }
}
