/* conv.c — 2-D convolution (NCHW) as im2col + our sgemm (kernels/gemm.h; no CPU BLAS).
 *
 * Per image, the output rows are cut into tiles of `tile_rows(a)` rows so the column buffer
 * (C R S x rows Q floats) stays near CONV_TILE floats whatever the image size. For each tile:
 *   forward         col = im2col(x rows) ;  y[g] = w[g] @ col[g]          (per group g)
 *   backward data   dcol[g] = w[g]^T @ gy[g] ;  gx += col2im(dcol)
 *   backward filter col = im2col(x rows) ;  gw[g] += gy[g] @ col[g]^T
 * A 1x1 kernel with stride 1 and no padding needs no column buffer: x itself is the matrix.
 * Forward and backward-data run one image per thread when the batch has at least as many images as
 * threads (each thread its own column buffer; sgemm is single-threaded inside a parallel region);
 * otherwise images run in turn and sgemm and im2col use all threads. The filter gradient always
 * walks the images in turn (one shared gw, accumulated in a fixed order, so results do not depend on
 * the thread count). */
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/gemm.h"

/* Target size of one column buffer tile, in floats (4 MiB: a few L2s' worth). */
#define CONV_TILE (1 << 20)

static int pointwise(const conv2d_args *a) {
    return a->R == 1 && a->S == 1 && a->sh == 1 && a->sw == 1 && a->ph == 0 && a->pw == 0;
}

static int64_t crs(const conv2d_args *a) { return (int64_t)a->C * a->R * a->S; }

/* Output rows per tile: at least one, at most P. */
static int tile_rows(const conv2d_args *a) {
    int64_t per_row = crs(a) * a->Q, r = per_row > 0 ? CONV_TILE / per_row : a->P;
    return r < 1 ? 1 : (r > a->P ? a->P : (int)r);
}

/* Threads that take whole images (1: images in turn, each product multithreaded). */
static int batch_threads(const conv2d_args *a) {
    int nt = omp_get_max_threads();
    return nt > 1 && a->N >= nt ? nt : 1;
}

static size_t tile_floats(const conv2d_args *a) { return (size_t)crs(a) * tile_rows(a) * a->Q; }

/* One column buffer per image thread (0 for the pointwise case). */
size_t cpu_conv2d_workspace(const conv2d_args *a) {
    return pointwise(a) ? 0 : (size_t)batch_threads(a) * tile_floats(a);
}

/* The same for backward data; the filter pass uses the first buffer. */
size_t cpu_conv2d_backward_workspace(const conv2d_args *a) { return cpu_conv2d_workspace(a); }

/* Valid output columns [*q0, *q1) for kernel column offset ox (input column = q * sw + ox). */
static void valid_cols(const conv2d_args *a, int ox, int *q0, int *q1) {
    int lo = ox >= 0 ? 0 : (-ox + a->sw - 1) / a->sw;
    int hi = ox > a->W - 1 ? 0 : (a->W - 1 - ox) / a->sw + 1;
    if (hi > a->Q) hi = a->Q;
    if (lo > hi) lo = hi;
    *q0 = lo;
    *q1 = hi;
}

/* col [(c, r, s), (p - p0) Q + q] = x[c, p sh - ph + r dh, q sw - pw + s dw] (0 outside) for output
 * rows [p0, p1) of one image xn [C, H, W]. */
static void im2col(const conv2d_args *a, const float *xn, int p0, int p1, float *col, int par) {
    const int Q = a->Q, rows = a->C * a->R * a->S;
    const int64_t nc = (int64_t)(p1 - p0) * Q;
    #pragma omp parallel for if (par && (int64_t)rows * nc > CPU_PAR_MIN)
    for (int row = 0; row < rows; row++) {
        int c = row / (a->R * a->S), r = row / a->S % a->R, s = row % a->S;
        float *dst = col + (int64_t)row * nc;
        const float *xc = xn + (int64_t)c * a->H * a->W;
        int ox = s * a->dw - a->pw, q0, q1;
        valid_cols(a, ox, &q0, &q1);
        for (int p = p0; p < p1; p++, dst += Q) {
            int ih = p * a->sh - a->ph + r * a->dh;
            if (ih < 0 || ih >= a->H || q0 == q1) {
                memset(dst, 0, (size_t)Q * sizeof(float));
                continue;
            }
            const float *xr = xc + (int64_t)ih * a->W + ox;
            for (int q = 0; q < q0; q++) dst[q] = 0.0f;
            if (a->sw == 1) {
                memcpy(dst + q0, xr + q0, (size_t)(q1 - q0) * sizeof(float));
            } else {
                for (int q = q0; q < q1; q++) dst[q] = xr[(int64_t)q * a->sw];
            }
            for (int q = q1; q < Q; q++) dst[q] = 0.0f;
        }
    }
}

/* gxn += the transpose of im2col applied to col (same layout). Channels run in parallel: rows of
 * one channel overlap in gx, rows of different channels do not. */
static void col2im(const conv2d_args *a, const float *col, int p0, int p1, float *gxn, int par) {
    const int Q = a->Q, RS = a->R * a->S;
    const int64_t nc = (int64_t)(p1 - p0) * Q;
    #pragma omp parallel for if (par && (int64_t)a->C * RS * nc > CPU_PAR_MIN)
    for (int c = 0; c < a->C; c++) {
        float *gc = gxn + (int64_t)c * a->H * a->W;
        for (int rs = 0; rs < RS; rs++) {
            int r = rs / a->S, s = rs % a->S, ox = s * a->dw - a->pw, q0, q1;
            valid_cols(a, ox, &q0, &q1);
            const float *src = col + ((int64_t)c * RS + rs) * nc;
            for (int p = p0; p < p1; p++, src += Q) {
                int ih = p * a->sh - a->ph + r * a->dh;
                if (ih < 0 || ih >= a->H) continue;
                float *gr = gc + (int64_t)ih * a->W + ox;
                if (a->sw == 1) {
                    #pragma omp simd
                    for (int q = q0; q < q1; q++) gr[q] += src[q];
                } else {
                    for (int q = q0; q < q1; q++) gr[(int64_t)q * a->sw] += src[q];
                }
            }
        }
    }
}

/* Forward of image n: y_n = w @ col (per group, per tile), then the bias. */
static void forward_image(const conv2d_args *a, int n, const float *x, const float *w,
                          const float *b, float *y, float *col, int par) {
    const int G = a->groups, Kg = a->K / G, Cg = a->C / G;
    const int64_t PQ = (int64_t)a->P * a->Q, CgRS = (int64_t)Cg * a->R * a->S;
    const float *xn = x + (int64_t)n * a->C * a->H * a->W;
    float *yn = y + (int64_t)n * a->K * PQ;
    if (pointwise(a)) {
        for (int g = 0; g < G; g++)
            sgemm(0, 0, Kg, (int)PQ, Cg, 1.0f, w + (int64_t)g * Kg * Cg, Cg, xn + g * Cg * PQ,
                  (int)PQ, 0.0f, yn + g * Kg * PQ, (int)PQ);
    } else {
        const int tr = tile_rows(a);
        for (int p0 = 0; p0 < a->P; p0 += tr) {
            int p1 = p0 + tr < a->P ? p0 + tr : a->P, nc = (p1 - p0) * a->Q;
            im2col(a, xn, p0, p1, col, par);
            for (int g = 0; g < G; g++)
                sgemm(0, 0, Kg, nc, (int)CgRS, 1.0f, w + g * Kg * CgRS, (int)CgRS,
                      col + g * CgRS * nc, nc, 0.0f, yn + g * Kg * PQ + (int64_t)p0 * a->Q, (int)PQ);
        }
    }
    if (b) {
        #pragma omp parallel for if (par && a->K * PQ > CPU_PAR_MIN)
        for (int k = 0; k < a->K; k++) {
            float *yk = yn + k * PQ, bk = b[k];
            #pragma omp simd
            for (int64_t i = 0; i < PQ; i++) yk[i] += bk;
        }
    }
}

void cpu_conv2d(const conv2d_args *a, const float *x, const float *w, const float *b, float *y,
                float *work) {
    const int bt = batch_threads(a);
    const size_t per = pointwise(a) ? 0 : tile_floats(a);
    if (bt > 1) {
        #pragma omp parallel for schedule(dynamic) num_threads(bt)
        for (int n = 0; n < a->N; n++)
            forward_image(a, n, x, w, b, y, work ? work + per * omp_get_thread_num() : NULL, 0);
    } else {
        for (int n = 0; n < a->N; n++) forward_image(a, n, x, w, b, y, work, 1);
    }
}

/* gx_n += col2im(w^T @ gy_n) (per group, per tile). */
static void backward_data_image(const conv2d_args *a, int n, const float *w, const float *gy,
                                float *gx, float *col, int par) {
    const int G = a->groups, Kg = a->K / G, Cg = a->C / G;
    const int64_t PQ = (int64_t)a->P * a->Q, CgRS = (int64_t)Cg * a->R * a->S;
    const float *gyn = gy + (int64_t)n * a->K * PQ;
    float *gxn = gx + (int64_t)n * a->C * a->H * a->W;
    if (pointwise(a)) { /* gx_n[C, HW] += w^T @ gy_n directly */
        for (int g = 0; g < G; g++)
            sgemm(1, 0, Cg, (int)PQ, Kg, 1.0f, w + (int64_t)g * Kg * Cg, Cg, gyn + g * Kg * PQ,
                  (int)PQ, 1.0f, gxn + g * Cg * PQ, (int)PQ);
        return;
    }
    const int tr = tile_rows(a);
    for (int p0 = 0; p0 < a->P; p0 += tr) {
        int p1 = p0 + tr < a->P ? p0 + tr : a->P, nc = (p1 - p0) * a->Q;
        for (int g = 0; g < G; g++)
            sgemm(1, 0, (int)CgRS, nc, Kg, 1.0f, w + g * Kg * CgRS, (int)CgRS,
                  gyn + g * Kg * PQ + (int64_t)p0 * a->Q, (int)PQ, 0.0f, col + g * CgRS * nc, nc);
        col2im(a, col, p0, p1, gxn, par);
    }
}

void cpu_conv2d_backward(const conv2d_args *a, const float *x, const float *w, const float *gy,
                         float *gx, float *gw, float *gb, float *work) {
    const int G = a->groups, Kg = a->K / G, Cg = a->C / G;
    const int64_t PQ = (int64_t)a->P * a->Q, CgRS = (int64_t)Cg * a->R * a->S;
    if (gb) { /* gb[k] += sum over images and positions, in double */
        #pragma omp parallel for if ((int64_t)a->N * a->K * PQ > CPU_PAR_MIN)
        for (int k = 0; k < a->K; k++) {
            double s = 0;
            for (int n = 0; n < a->N; n++) {
                const float *g = gy + ((int64_t)n * a->K + k) * PQ;
                #pragma omp simd reduction(+ : s)
                for (int64_t i = 0; i < PQ; i++) s += g[i];
            }
            gb[k] += (float)s;
        }
    }
    if (gx) {
        const int bt = batch_threads(a);
        const size_t per = pointwise(a) ? 0 : tile_floats(a);
        if (bt > 1) {
            #pragma omp parallel for schedule(dynamic) num_threads(bt)
            for (int n = 0; n < a->N; n++)
                backward_data_image(a, n, w, gy, gx, work ? work + per * omp_get_thread_num() : NULL, 0);
        } else {
            for (int n = 0; n < a->N; n++) backward_data_image(a, n, w, gy, gx, work, 1);
        }
    }
    if (gw) { /* gw[g] += gy_n[g] @ col[g]^T, images in turn */
        const int tr = tile_rows(a);
        for (int n = 0; n < a->N; n++) {
            const float *xn = x + (int64_t)n * a->C * a->H * a->W, *gyn = gy + (int64_t)n * a->K * PQ;
            if (pointwise(a)) {
                for (int g = 0; g < G; g++)
                    sgemm(0, 1, Kg, Cg, (int)PQ, 1.0f, gyn + g * Kg * PQ, (int)PQ, xn + g * Cg * PQ,
                          (int)PQ, 1.0f, gw + (int64_t)g * Kg * Cg, Cg);
                continue;
            }
            for (int p0 = 0; p0 < a->P; p0 += tr) {
                int p1 = p0 + tr < a->P ? p0 + tr : a->P, nc = (p1 - p0) * a->Q;
                im2col(a, xn, p0, p1, work, 1);
                for (int g = 0; g < G; g++)
                    sgemm(0, 1, Kg, (int)CgRS, nc, 1.0f, gyn + g * Kg * PQ + (int64_t)p0 * a->Q,
                          (int)PQ, work + g * CgRS * nc, nc, 1.0f, gw + g * Kg * CgRS, (int)CgRS);
            }
        }
    }
}
