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

/* gx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * w; gw += sum_r gy * xhat,
 * gb += sum_r gy. One pass over x and gy: rows go in fixed blocks of LN_RB; each block adds its
 * rows' gy * xhat and gy into its own float partial row (rows in order), and the partials are then
 * summed per column in block order in double. The blocks do not depend on the thread count, so
 * neither do the results. */
#define LN_RB 32

/* The partial rows (ceil(rows / LN_RB) blocks x 2 x cols), then a row of ones (cols) standing in
 * for a missing weight. */
size_t cpu_layernorm_backward_workspace(int64_t rows, int64_t cols) {
    return (size_t)((rows + LN_RB - 1) / LN_RB * 2 * cols + cols);
}

void cpu_layernorm_backward(int64_t rows, int64_t cols, const float *x, const float *w,
                            const float *mean, const float *rstd, const float *gy, float *gx,
                            float *gw, float *gb, float *work) {
    int64_t nblk = (rows + LN_RB - 1) / LN_RB;
    int want_wb = gw || gb;
    float *part = want_wb ? work : NULL;
    if (!w) { /* no affine weight: g = gy */
        float *ones = work + nblk * 2 * cols;
        for (int64_t j = 0; j < cols; j++) ones[j] = 1.0f;
        w = ones;
    }
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t bk = 0; bk < nblk; bk++) {
        float *pw = want_wb ? part + bk * 2 * cols : NULL, *pb = pw ? pw + cols : NULL;
        if (pw)
            for (int64_t j = 0; j < 2 * cols; j++) pw[j] = 0.0f;
        int64_t r1 = (bk + 1) * LN_RB < rows ? (bk + 1) * LN_RB : rows;
        for (int64_t r = bk * LN_RB; r < r1; r++) {
            const float *xr = x + r * cols, *gr = gy + r * cols;
            const float mu = mean[r], rs = rstd[r];
            if (gx) {
                double s1 = 0, s2 = 0;
                #pragma omp simd reduction(+ : s1, s2)
                for (int64_t j = 0; j < cols; j++) {
                    float g = gr[j] * w[j], xh = (xr[j] - mu) * rs;
                    s1 += g;
                    s2 += (double)(g * xh);
                }
                const float m1 = (float)(s1 / (double)cols), m2 = (float)(s2 / (double)cols);
                float *o = gx + r * cols;
                #pragma omp simd
                for (int64_t j = 0; j < cols; j++) {
                    float g = gr[j] * w[j], xh = (xr[j] - mu) * rs;
                    o[j] += rs * (g - m1 - xh * m2);
                }
            }
            if (pw) {
                #pragma omp simd
                for (int64_t j = 0; j < cols; j++) {
                    pw[j] += gr[j] * ((xr[j] - mu) * rs);
                    pb[j] += gr[j];
                }
            }
        }
    }
    if (want_wb) {
        const int64_t CB = 64;
        #pragma omp parallel for if (nblk * cols > CPU_PAR_MIN)
        for (int64_t c0 = 0; c0 < cols; c0 += CB) {
            int64_t cl = cols - c0 < CB ? cols - c0 : CB;
            double aw[64] = {0}, ab[64] = {0};
            for (int64_t bk = 0; bk < nblk; bk++) {
                const float *pw = part + bk * 2 * cols + c0, *pb = pw + cols;
                #pragma omp simd
                for (int64_t c = 0; c < cl; c++) {
                    aw[c] += pw[c];
                    ab[c] += pb[c];
                }
            }
            for (int64_t c = 0; c < cl; c++) {
                if (gw) gw[c0 + c] += (float)aw[c];
                if (gb) gb[c0 + c] += (float)ab[c];
            }
        }
    }
}
