/* pool.c — max pooling (with argmax for the backward) and adaptive average pooling over NCHW
 * planes. Planes run in parallel; a plane's backward only writes its own input plane. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

/* Output (p, q) of one plane: the reference (maxpool2d_interior_avx512 does the interior windows
 * of strides 1 and 2 the same way, branch-free). */
static void window_ref(const pool2d_args *a, const float *xp, int p, int q, float *yp, int32_t *ap) {
    int h0 = p * a->sh - a->ph;
    int r0 = h0 < 0 ? -h0 : 0, r1 = h0 + a->R > a->H ? a->H - h0 : a->R;
    int w0 = q * a->sw - a->pw;
    int s0 = w0 < 0 ? -w0 : 0, s1 = w0 + a->S > a->W ? a->W - w0 : a->S;
    float m = -INFINITY;
    int32_t am = -1;
    for (int r = r0; r < r1; r++)
        for (int s = s0; s < s1; s++) {
            int32_t i = (h0 + r) * a->W + w0 + s;
            float v = xp[i];
            if (v > m || isnan(v) || am < 0) { /* strict: the first max wins ties */
                m = v;
                am = i;
            }
        }
    yp[(int64_t)p * a->Q + q] = m;
    ap[(int64_t)p * a->Q + q] = am;
}

void cpu_maxpool2d(const pool2d_args *a, const float *x, float *y, int32_t *argmax) {
    const int64_t planes = (int64_t)a->N * a->C, HW = (int64_t)a->H * a->W, PQ = (int64_t)a->P * a->Q;
    /* outputs [qa, qb) of a row have their whole window inside the columns */
    int qa = (a->pw + a->sw - 1) / a->sw, qb = a->W - a->S + a->pw < 0 ? 0 : (a->W - a->S + a->pw) / a->sw + 1;
    qb = qb > a->Q ? a->Q : qb;
    int simd = cpu_simd() && (a->sw == 1 || a->sw == 2) && qb > qa;
    #pragma omp parallel for if (planes * PQ * a->R * a->S > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * HW;
        float *yp = y + pl * PQ;
        int32_t *ap = argmax + pl * PQ;
        if (simd) maxpool2d_interior_avx512(a, xp, yp, ap, qa, qb);
        for (int p = 0; p < a->P; p++)
            for (int q = 0; q < a->Q; q++)
                if (!simd || q < qa || q >= qb) window_ref(a, xp, p, q, yp, ap);
    }
}

void cpu_maxpool2d_backward(const pool2d_args *a, const float *gy, const int32_t *argmax, float *gx) {
    const int64_t planes = (int64_t)a->N * a->C, HW = (int64_t)a->H * a->W, PQ = (int64_t)a->P * a->Q;
    #pragma omp parallel for if (planes * PQ > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *gp = gy + pl * PQ;
        const int32_t *ap = argmax + pl * PQ;
        float *gxp = gx + pl * HW;
        for (int64_t i = 0; i < PQ; i++)
            if (ap[i] >= 0) gxp[ap[i]] += gp[i];
    }
}

/* Window [*lo, *hi) of output index i of n over an input of size len (PyTorch's start/end index). */
static inline void adaptive_window(int i, int n, int len, int *lo, int *hi) {
    *lo = (int)((int64_t)i * len / n);
    *hi = (int)(((int64_t)(i + 1) * len + n - 1) / n);
}

void cpu_adaptive_avgpool2d(int64_t NC, int H, int W, int OH, int OW, const float *x, float *y) {
    #pragma omp parallel for if (NC * H * W > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < NC; pl++) {
        const float *xp = x + pl * H * W;
        for (int i = 0; i < OH; i++) {
            int h0, h1;
            adaptive_window(i, OH, H, &h0, &h1);
            for (int j = 0; j < OW; j++) {
                int w0, w1;
                adaptive_window(j, OW, W, &w0, &w1);
                double s = 0;
                for (int h = h0; h < h1; h++) {
                    const float *xr = xp + (int64_t)h * W;
                    #pragma omp simd reduction(+ : s)
                    for (int w = w0; w < w1; w++) s += xr[w];
                }
                y[(pl * OH + i) * OW + j] = (float)(s / (double)((h1 - h0) * (w1 - w0)));
            }
        }
    }
}

void cpu_adaptive_avgpool2d_backward(int64_t NC, int H, int W, int OH, int OW, const float *gy,
                                     float *gx) {
    #pragma omp parallel for if (NC * H * W > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < NC; pl++) {
        float *gp = gx + pl * H * W;
        for (int i = 0; i < OH; i++) {
            int h0, h1;
            adaptive_window(i, OH, H, &h0, &h1);
            for (int j = 0; j < OW; j++) {
                int w0, w1;
                adaptive_window(j, OW, W, &w0, &w1);
                float g = gy[(pl * OH + i) * OW + j] / (float)((h1 - h0) * (w1 - w0));
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) gp[(int64_t)h * W + w] += g;
            }
        }
    }
}
