/* norm.c — layer normalisation over the last axis (two-pass mean/variance in double).
 *
 * Storage types (kernels/ops.def): x (and its gradient) of type xt, y (and its gradient) of type
 * yt, each ER_F32 or ER_BF16; weights, biases, statistics and their gradients fp32. A bf16 row is
 * widened into an fp32 row buffer, the fp32 row code runs on it unchanged, and a bf16 result is
 * rounded once (to nearest even). So the bf16 paths give exactly the fp32 path's result on the
 * widened inputs, rounded: what tests/kernels/test_norm_bf16.c checks bit for bit. */
#include <math.h>


#include "kernels/cpu/cpu_kernels.h"

/* The row buffers of a bf16 row live on the thread's stack. */
#define LN_ROW_MAX ER_LAYERNORM_BF16_MAX_COLS

static inline void ln_row(int64_t cols, const float *restrict xr, const float *w, const float *b, float eps,
                          float *restrict yr, float *mean, float *rstd) {
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
    *mean = mu;
    *rstd = rs;
    if (w && b) {
        #pragma omp simd
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
    } else {
        for (int64_t j = 0; j < cols; j++)
            yr[j] = (xr[j] - mu) * rs * (w ? w[j] : 1.0f) + (b ? b[j] : 0.0f);
    }
}

void cpu_layernorm(int64_t rows, int64_t cols, int xt, const void *x, const float *w, const float *b,
                   float eps, int yt, void *y, float *mean, float *rstd) {
    if (xt == ER_F32 && yt == ER_F32) {
        #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
        for (int64_t r = 0; r < rows; r++)
            ln_row(cols, (const float *)x + r * cols, w, b, eps, (float *)y + r * cols, mean + r, rstd + r);
        return;
    }
    if (cols > LN_ROW_MAX) return; /* the op layer refuses such rows */
    #pragma omp parallel for if (rows * cols > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        float xb[LN_ROW_MAX] __attribute__((aligned(64))), yb[LN_ROW_MAX] __attribute__((aligned(64)));
        const float *xr = (const float *)x + r * cols;
        if (xt == ER_BF16) {
            cpu_cast_span(cols, ER_BF16, (const uint16_t *)x + r * cols, ER_F32, xb, 0);
            xr = xb;
        }
        float *yr = yt == ER_BF16 ? yb : (float *)y + r * cols;
        ln_row(cols, xr, w, b, eps, yr, mean + r, rstd + r);
        if (yt == ER_BF16) cpu_cast_span(cols, ER_F32, yb, ER_BF16, (uint16_t *)y + r * cols, 0);
    }
}

/* gx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * w; gw += sum_r gy * xhat,
 * gb += sum_r gy. One pass over x and gy: rows go in fixed blocks of LN_RB; each block adds its
 * rows' gy * xhat and gy into its own float partial row (rows in order), and the partials are then
 * summed per column in block order in double. The blocks do not depend on the thread count, so
 * neither do the results. A bf16 gx receives the fp32 sum rounded once: round(gx + term). */
#define LN_RB 32

/* The partial rows (ceil(rows / LN_RB) blocks x 2 x cols), then a row of ones (cols) standing in
 * for a missing weight. */
size_t cpu_layernorm_backward_workspace(int64_t rows, int64_t cols) {
    return (size_t)((rows + LN_RB - 1) / LN_RB * 2 * cols + cols);
}

/* One row's contributions: o[j] += the input gradient (o may be NULL), pw/pb += its weight and
 * bias terms (may be NULL). */
static inline void ln_backward_row(int64_t cols, const float *restrict xr, const float *restrict gr, const float *w,
                                   float mu, float rs, float *restrict o, float *restrict pw, float *restrict pb) {
    if (o) {
        double s1 = 0, s2 = 0;
        #pragma omp simd reduction(+ : s1, s2)
        for (int64_t j = 0; j < cols; j++) {
            float g = gr[j] * w[j], xh = (xr[j] - mu) * rs;
            s1 += g;
            s2 += (double)(g * xh);
        }
        const float m1 = (float)(s1 / (double)cols), m2 = (float)(s2 / (double)cols);
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

void cpu_layernorm_backward(int64_t rows, int64_t cols, int xt, const void *x, const float *w,
                            const float *mean, const float *rstd, int gt, const void *gy, void *gx,
                            float *gw, float *gb, float *work) {
    const int mixed = xt != ER_F32 || gt != ER_F32;
    if (mixed && cols > LN_ROW_MAX) return; /* refused by the op layer */
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
            if (!mixed) {
                ln_backward_row(cols, (const float *)x + r * cols, (const float *)gy + r * cols, w, mean[r], rstd[r],
                                gx ? (float *)gx + r * cols : NULL, pw, pb);
                continue;
            }
            float xb[LN_ROW_MAX] __attribute__((aligned(64))), gb16[LN_ROW_MAX] __attribute__((aligned(64)));
            float ob[LN_ROW_MAX] __attribute__((aligned(64)));
            const float *xr = (const float *)x + r * cols, *gr = (const float *)gy + r * cols;
            if (xt == ER_BF16) {
                cpu_cast_span(cols, ER_BF16, (const uint16_t *)x + r * cols, ER_F32, xb, 0);
                xr = xb;
            }
            if (gt == ER_BF16) {
                cpu_cast_span(cols, ER_BF16, (const uint16_t *)gy + r * cols, ER_F32, gb16, 0);
                gr = gb16;
            }
            float *o = NULL;
            if (gx && xt == ER_BF16) {
                for (int64_t j = 0; j < cols; j++) ob[j] = 0.0f;
                o = ob;
            } else if (gx) {
                o = (float *)gx + r * cols;
            }
            ln_backward_row(cols, xr, gr, w, mean[r], rstd[r], o, pw, pb);
            if (gx && xt == ER_BF16) cpu_cast_span(cols, ER_F32, ob, ER_BF16, (uint16_t *)gx + r * cols, 1);
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
