/* reduce.c — axis reductions and the row-wise kernels built on them: softmax / log-softmax,
 * L2 normalisation, cross-entropy. Sums accumulate in double; softmax subtracts the row max. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_reduce(int op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y,
                int32_t *argmax) {
    if (inner == 1) { /* reduce along contiguous rows */
        #pragma omp parallel for if (outer * len > CPU_PAR_MIN)
        for (int64_t o = 0; o < outer; o++) {
            const float *xr = x + o * len;
            if (op == RED_MAX) {
                float m = len > 0 ? xr[0] : -INFINITY;
                int32_t am = 0;
                for (int64_t j = 1; j < len; j++)
                    if (xr[j] > m) { m = xr[j]; am = (int32_t)j; }
                y[o] = m;
                if (argmax) argmax[o] = am;
            } else {
                double s = 0;
                #pragma omp simd reduction(+ : s)
                for (int64_t j = 0; j < len; j++) s += xr[j];
                y[o] = (float)(op == RED_MEAN ? s / (double)len : s);
            }
        }
        return;
    }
    /* inner > 1: each output column sums a strided column; walk rows, accumulate a block of
     * columns in double so memory access stays unit-stride. */
    const int64_t CB = 256;
    int64_t nb = (inner + CB - 1) / CB;
    #pragma omp parallel for collapse(2) if (outer * len * inner > CPU_PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t b = 0; b < nb; b++) {
            int64_t c0 = b * CB, cl = inner - c0 < CB ? inner - c0 : CB;
            double acc[256];
            int32_t am[256];
            const float *xb = x + o * len * inner + c0;
            for (int64_t c = 0; c < cl; c++) {
                acc[c] = op == RED_MAX ? (len > 0 ? xb[c] : -INFINITY) : 0.0;
                am[c] = 0;
            }
            for (int64_t j = op == RED_MAX ? 1 : 0; j < len; j++) {
                const float *xr = xb + j * inner;
                if (op == RED_MAX) {
                    for (int64_t c = 0; c < cl; c++)
                        if (xr[c] > acc[c]) { acc[c] = xr[c]; am[c] = (int32_t)j; }
                } else {
                    #pragma omp simd
                    for (int64_t c = 0; c < cl; c++) acc[c] += xr[c];
                }
            }
            float *yb = y + o * inner + c0;
            for (int64_t c = 0; c < cl; c++) {
                yb[c] = (float)(op == RED_MEAN ? acc[c] / (double)len : acc[c]);
                if (argmax && op == RED_MAX) argmax[o * inner + c0 + c] = am[c];
            }
        }
}

void cpu_reduce_backward(int op, int64_t outer, int64_t len, int64_t inner, const float *gy,
                         const int32_t *argmax, float *gx) {
    const float scale = op == RED_MEAN ? 1.0f / (float)len : 1.0f;
    #pragma omp parallel for collapse(2) if (outer * len * inner > CPU_PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < len; j++) {
            float *gr = gx + (o * len + j) * inner;
            const float *g = gy + o * inner;
            if (op == RED_MAX) {
                const int32_t *am = argmax + o * inner;
                for (int64_t c = 0; c < inner; c++)
                    if (am[c] == j) gr[c] += g[c];
            } else {
                #pragma omp simd
                for (int64_t c = 0; c < inner; c++) gr[c] += g[c] * scale;
            }
        }
}

void cpu_softmax(int64_t rows, int64_t cols, const float *x, float *y, int log) {
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = -INFINITY;
        #pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < cols; j++) m = xr[j] > m ? xr[j] : m;
        if (m == -INFINITY) m = 0; /* all -inf: keep it finite */
        double s = 0;
        if (log) {
            #pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < cols; j++) s += exp_vec(xr[j] - m);
            float lse = m + (float)logf((float)s);
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++) yr[j] = xr[j] - lse;
        } else {
            #pragma omp simd reduction(+ : s)
            for (int64_t j = 0; j < cols; j++) {
                float e = exp_vec(xr[j] - m);
                yr[j] = e;
                s += e;
            }
            float inv = s > 0 ? (float)(1.0 / s) : 0.0f;
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++) yr[j] *= inv;
        }
    }
}

/* softmax: gx += y * (gy - <gy, y>); log-softmax: gx += gy - exp(y) * sum(gy). */
void cpu_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                          int log) {
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * cols, *gr = gy + r * cols;
        float *xr = gx + r * cols;
        double d = 0;
        if (log) {
            #pragma omp simd reduction(+ : d)
            for (int64_t j = 0; j < cols; j++) d += gr[j];
            float df = (float)d;
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++) xr[j] += gr[j] - exp_vec(yr[j]) * df;
        } else {
            #pragma omp simd reduction(+ : d)
            for (int64_t j = 0; j < cols; j++) d += (double)gr[j] * yr[j];
            float df = (float)d;
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++) xr[j] += yr[j] * (gr[j] - df);
        }
    }
}

void cpu_l2norm(int64_t rows, int64_t cols, const float *x, float *y, float *norm, float eps) {
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double s = 0;
        for (int64_t j = 0; j < cols; j++) s += (double)xr[j] * xr[j];
        float n = (float)sqrt(s);
        norm[r] = n;
        float inv = 1.0f / (n > eps ? n : eps);
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++) y[r * cols + j] = xr[j] * inv;
    }
}

/* n > eps: gx += (gy - y <gy, y>) / n; otherwise y = x / eps is linear: gx += gy / eps. */
void cpu_l2norm_backward(int64_t rows, int64_t cols, const float *y, const float *norm,
                         const float *gy, float *gx, float eps) {
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * cols, *gr = gy + r * cols;
        float *xr = gx + r * cols;
        float n = norm[r];
        if (n > eps) {
            double d = 0;
            for (int64_t j = 0; j < cols; j++) d += (double)gr[j] * yr[j];
            float df = (float)d, inv = 1.0f / n;
            #pragma omp simd
            for (int64_t j = 0; j < cols; j++) xr[j] += (gr[j] - yr[j] * df) * inv;
        } else {
            float inv = 1.0f / eps;
            for (int64_t j = 0; j < cols; j++) xr[j] += gr[j] * inv;
        }
    }
}

void cpu_cross_entropy(int64_t rows, int64_t cols, const float *x, const int32_t *label, float *loss,
                       float *lse) {
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; j++) m = xr[j] > m ? xr[j] : m;
        double s = 0;
        for (int64_t j = 0; j < cols; j++) s += exp((double)xr[j] - m);
        double l = m + log(s);
        lse[r] = (float)l;
        loss[r] = label[r] >= 0 ? (float)(l - xr[label[r]]) : 0.0f;
    }
}

void cpu_cross_entropy_backward(int64_t rows, int64_t cols, const float *x, const int32_t *label,
                                const float *lse, const float *gy, float denom, float *gx) {
    const float scale = gy[0] / denom;
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        if (label[r] < 0) continue;
        const float *xr = x + r * cols;
        float *gr = gx + r * cols;
        for (int64_t j = 0; j < cols; j++) gr[j] += scale * expf(xr[j] - lse[r]);
        gr[label[r]] -= scale;
    }
}
