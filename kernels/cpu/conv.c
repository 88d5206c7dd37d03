/* conv.c — 2-D convolution (NCHW) as im2col + our sgemm (kernels/gemm.h; no CPU BLAS).
 *
 * Images go in groups: one image whose output rows are cut into tiles of `tile_rows(a)` rows so the
 * column buffer (C R S x rows Q floats) stays near CONV_TILE floats whatever the image size, or,
 * for small maps (P Q < CONV_MIN_COLS: ResNet's 7x7 and 14x14 stages), several whole images side by
 * side so the products stay wide. Per tile, for each group g of channels:
 *   forward         col = im2col(x rows) ;  y[g] = w[g] @ col[g]
 *   backward data   dcol[g] = w[g]^T @ gy[g] ;  gx += col2im(dcol)
 *   backward filter col = im2col(x rows) ;  gw[g] += gy[g] @ col[g]^T
 * (an image group's y / gy goes through a [K, cols] block next to col). A 1x1 kernel with stride 1
 * and no padding on a large map needs no column buffer: x itself is the matrix.
 * Forward and backward-data run one image group per thread when there are at least as many groups
 * as threads (each thread its own buffers; sgemm is single-threaded inside a parallel region);
 * otherwise groups run in turn and sgemm and im2col use all threads. The filter gradient always
 * walks the groups in turn (one shared gw, accumulated in a fixed order, so results do not depend
 * on the thread count). */
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/gemm.h"

/* Target size of one column buffer tile, in floats (4 MiB: a few L2s' worth). */
#define CONV_TILE (1 << 20)
/* Below this many output positions per image, several images share one column buffer so the
 * products stay wide (a 7x7 map alone gives sgemm 49 columns: mostly edge tiles). */
#define CONV_MIN_COLS 256

static int pointwise(const conv2d_args *a) {
    return a->R == 1 && a->S == 1 && a->sh == 1 && a->sw == 1 && a->ph == 0 && a->pw == 0;
}

static int64_t crs(const conv2d_args *a) { return (int64_t)a->C * a->R * a->S; }

/* Images per column buffer: 1, or enough small maps side by side to give CONV_MIN_COLS columns
 * (bounded by CONV_TILE). */
static int group_images(const conv2d_args *a) {
    int64_t PQ = (int64_t)a->P * a->Q;
    if (PQ >= CONV_MIN_COLS) return 1;
    int64_t g = (CONV_MIN_COLS + PQ - 1) / PQ, cap = CONV_TILE / (crs(a) * PQ + (int64_t)a->K * PQ);
    if (g > cap) g = cap;
    if (g > a->N) g = a->N;
    return g < 1 ? 1 : (int)g;
}

/* Output rows per tile (one image): at least one, at most P; a group of images takes all rows. */
static int tile_rows(const conv2d_args *a) {
    if (group_images(a) > 1) return a->P;
    int64_t per_row = crs(a) * a->Q, r = per_row > 0 ? CONV_TILE / per_row : a->P;
    return r < 1 ? 1 : (r > a->P ? a->P : (int)r);
}

/* 1x1 stride-1 maps alone need no buffer: x (and y) are the matrices. */
static int direct(const conv2d_args *a) { return pointwise(a) && group_images(a) == 1; }

static int ngroups(const conv2d_args *a) { return (a->N + group_images(a) - 1) / group_images(a); }

/* Threads that take whole image groups (1: groups in turn, each product multithreaded). */
static int batch_threads(const conv2d_args *a) {
    int nt = omp_get_max_threads();
    return nt > 1 && ngroups(a) >= nt ? nt : 1;
}

/* Columns of one buffer, and the floats of one thread's scratch: the column buffer [C R S, cols],
 * plus for a group of images the [K, cols] output / output-gradient block. */
static int64_t max_cols(const conv2d_args *a) { return (int64_t)group_images(a) * tile_rows(a) * a->Q; }
static size_t per_thread(const conv2d_args *a) {
    if (direct(a)) return 0;
    return (size_t)((crs(a) + (group_images(a) > 1 ? a->K : 0)) * max_cols(a));
}

size_t cpu_conv2d_workspace(const conv2d_args *a) { return (size_t)batch_threads(a) * per_thread(a); }

/* The same for backward data; the filter pass uses the first thread's part. */
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

/* col [(c, r, s), (p - p0) Q + q] (row stride ld) = x[c, p sh - ph + r dh, q sw - pw + s dw] (0
 * outside) for output rows [p0, p1) of one image xn [C, H, W]. */
static void im2col(const conv2d_args *a, const float *xn, int p0, int p1, float *col, int64_t ld,
                   int par) {
    const int Q = a->Q, rows = a->C * a->R * a->S;
    #pragma omp parallel for if (par && (int64_t)rows * (p1 - p0) * Q > CPU_PAR_MIN)
    for (int row = 0; row < rows; row++) {
        int c = row / (a->R * a->S), r = row / a->S % a->R, s = row % a->S;
        float *dst = col + (int64_t)row * ld;
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
static void col2im(const conv2d_args *a, const float *col, int64_t ld, int p0, int p1, float *gxn,
                   int par) {
    const int Q = a->Q, RS = a->R * a->S;
    #pragma omp parallel for if (par && (int64_t)a->C * RS * (p1 - p0) * Q > CPU_PAR_MIN)
    for (int c = 0; c < a->C; c++) {
        float *gc = gxn + (int64_t)c * a->H * a->W;
        for (int rs = 0; rs < RS; rs++) {
            int r = rs / a->S, s = rs % a->S, ox = s * a->dw - a->pw, q0, q1;
            valid_cols(a, ox, &q0, &q1);
            const float *src = col + ((int64_t)c * RS + rs) * ld;
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

/* A group of nb images side by side in one [K, nb PQ] block (buf, ld nb PQ) and back: y / gy
 * of image n0 + i, channel k, are columns i PQ .. (i + 1) PQ of row k. */
static void group_pack(const conv2d_args *a, const float *y, int n0, int nb, float *buf, int to_buf) {
    const int64_t PQ = (int64_t)a->P * a->Q, ld = nb * PQ;
    for (int i = 0; i < nb; i++)
        for (int k = 0; k < a->K; k++) {
            float *yk = (float *)y + ((int64_t)(n0 + i) * a->K + k) * PQ, *bk = buf + k * ld + i * PQ;
            memcpy(to_buf ? bk : yk, to_buf ? yk : bk, (size_t)PQ * sizeof(float));
        }
}

/* Forward of images [n0, n0 + nb): y = w @ col (per group of channels g, per tile), then bias. */
static void forward_group(const conv2d_args *a, int n0, int nb, const float *x, const float *w,
                          const float *b, float *y, float *col, int par) {
    const int G = a->groups, Kg = a->K / G, Cg = a->C / G;
    const int64_t PQ = (int64_t)a->P * a->Q, CgRS = (int64_t)Cg * a->R * a->S, CHW = (int64_t)a->C * a->H * a->W;
    if (direct(a)) { /* y_n[K, HW] = w[K, C] @ x_n[C, HW] */
        const float *xn = x + n0 * CHW;
        float *yn = y + (int64_t)n0 * a->K * PQ;
        for (int g = 0; g < G; g++)
            sgemm(sgemm_precision_of(a->compute), 0, 0, Kg, (int)PQ, Cg, 1.0f, w + (int64_t)g * Kg * Cg, Cg, xn + g * Cg * PQ,
                  (int)PQ, 0.0f, yn + g * Kg * PQ, (int)PQ);
    } else {
        const int tr = tile_rows(a);
        for (int p0 = 0; p0 < a->P; p0 += tr) {
            int p1 = p0 + tr < a->P ? p0 + tr : a->P, nc = nb * (p1 - p0) * a->Q;
            for (int i = 0; i < nb; i++)
                im2col(a, x + (n0 + i) * CHW, p0, p1, col + (int64_t)i * (p1 - p0) * a->Q, nc, par);
            /* one image: straight into y's rows (ld PQ); a group: into the block after col */
            float *out = nb == 1 ? y + (int64_t)n0 * a->K * PQ + (int64_t)p0 * a->Q : col + crs(a) * nc;
            int ldo = nb == 1 ? (int)PQ : nc;
            for (int g = 0; g < G; g++)
                sgemm(sgemm_precision_of(a->compute), 0, 0, Kg, nc, (int)CgRS, 1.0f, w + g * Kg * CgRS, (int)CgRS,
                      col + g * CgRS * nc, nc, 0.0f, out + (int64_t)g * Kg * ldo, ldo);
            if (nb > 1) group_pack(a, y, n0, nb, out, 0);
        }
    }
    if (b) {
        #pragma omp parallel for collapse(2) if (par && (int64_t)nb * a->K * PQ > CPU_PAR_MIN)
        for (int i = 0; i < nb; i++)
            for (int k = 0; k < a->K; k++) {
                float *yk = y + ((int64_t)(n0 + i) * a->K + k) * PQ, bk = b[k];
                #pragma omp simd
                for (int64_t j = 0; j < PQ; j++) yk[j] += bk;
            }
    }
}

/* Runs fn over the image groups: one group per thread when there are enough groups, else in turn
 * with every product multithreaded. */
#define FOR_GROUPS(a, work, CALL)                                                                  \
    do {                                                                                           \
        const int gi_ = group_images(a), ng_ = ngroups(a), bt_ = batch_threads(a);                 \
        const size_t per_ = per_thread(a);                                                         \
        if (bt_ > 1) {                                                                             \
            _Pragma("omp parallel for schedule(dynamic) num_threads(bt_)")                         \
            for (int grp = 0; grp < ng_; grp++) {                                                  \
                int n0 = grp * gi_, nb = a->N - n0 < gi_ ? a->N - n0 : gi_, par = 0;               \
                float *col = work ? work + per_ * omp_get_thread_num() : NULL;                     \
                CALL;                                                                              \
            }                                                                                      \
        } else {                                                                                   \
            for (int grp = 0; grp < ng_; grp++) {                                                  \
                int n0 = grp * gi_, nb = a->N - n0 < gi_ ? a->N - n0 : gi_, par = 1;               \
                float *col = work;                                                                 \
                CALL;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

void cpu_conv2d(const conv2d_args *a, const float *x, const float *w, const float *b, float *y,
                float *work) {
    FOR_GROUPS(a, work, forward_group(a, n0, nb, x, w, b, y, col, par));
}

/* gx of images [n0, n0 + nb) += col2im(w^T @ gy) (per group of channels, per tile); acc 0: =, gx not
 * read (the group's gx zeroed here for col2im's additions, or the direct product with beta 0). */
static void backward_data_group(const conv2d_args *a, int n0, int nb, const float *w,
                                const float *gy, float *gx, float *col, int par, int acc) {
    const int G = a->groups, Kg = a->K / G, Cg = a->C / G;
    const int64_t PQ = (int64_t)a->P * a->Q, CgRS = (int64_t)Cg * a->R * a->S, CHW = (int64_t)a->C * a->H * a->W;
    if (direct(a)) { /* gx_n[C, HW] += w^T @ gy_n directly */
        const float *gyn = gy + (int64_t)n0 * a->K * PQ;
        float *gxn = gx + n0 * CHW;
        for (int g = 0; g < G; g++)
            sgemm(sgemm_precision_of(a->compute), 1, 0, Cg, (int)PQ, Kg, 1.0f, w + (int64_t)g * Kg * Cg, Cg, gyn + g * Kg * PQ,
                  (int)PQ, acc ? 1.0f : 0.0f, gxn + g * Cg * PQ, (int)PQ);
        return;
    }
    if (!acc) memset(gx + n0 * CHW, 0, (size_t)nb * CHW * sizeof(float)); /* col2im adds overlapping windows */
    const int tr = tile_rows(a);
    for (int p0 = 0; p0 < a->P; p0 += tr) {
        int p1 = p0 + tr < a->P ? p0 + tr : a->P, nc = nb * (p1 - p0) * a->Q;
        const float *in = gy + (int64_t)n0 * a->K * PQ + (int64_t)p0 * a->Q;
        int ldi = (int)PQ;
        if (nb > 1) {
            float *blk = col + crs(a) * nc;
            group_pack(a, gy, n0, nb, blk, 1);
            in = blk;
            ldi = nc;
        }
        for (int g = 0; g < G; g++)
            sgemm(sgemm_precision_of(a->compute), 1, 0, (int)CgRS, nc, Kg, 1.0f, w + g * Kg * CgRS, (int)CgRS, in + (int64_t)g * Kg * ldi,
                  ldi, 0.0f, col + g * CgRS * nc, nc);
        for (int i = 0; i < nb; i++)
            col2im(a, col + (int64_t)i * (p1 - p0) * a->Q, nc, p0, p1, gx + (n0 + i) * CHW, par);
    }
}

/* gw += gy @ col^T over images [n0, n0 + nb) (threads inside the products). */
static void backward_filter_group(const conv2d_args *a, int n0, int nb, const float *x,
                                  const float *gy, float *gw, float *col) {
    const int G = a->groups, Kg = a->K / G, Cg = a->C / G;
    const int64_t PQ = (int64_t)a->P * a->Q, CgRS = (int64_t)Cg * a->R * a->S, CHW = (int64_t)a->C * a->H * a->W;
    if (direct(a)) {
        const float *xn = x + n0 * CHW, *gyn = gy + (int64_t)n0 * a->K * PQ;
        for (int g = 0; g < G; g++)
            sgemm(sgemm_precision_of(a->compute), 0, 1, Kg, Cg, (int)PQ, 1.0f, gyn + g * Kg * PQ, (int)PQ, xn + g * Cg * PQ, (int)PQ,
                  1.0f, gw + (int64_t)g * Kg * Cg, Cg);
        return;
    }
    const int tr = tile_rows(a);
    for (int p0 = 0; p0 < a->P; p0 += tr) {
        int p1 = p0 + tr < a->P ? p0 + tr : a->P, nc = nb * (p1 - p0) * a->Q;
        for (int i = 0; i < nb; i++)
            im2col(a, x + (n0 + i) * CHW, p0, p1, col + (int64_t)i * (p1 - p0) * a->Q, nc, 1);
        const float *in = gy + (int64_t)n0 * a->K * PQ + (int64_t)p0 * a->Q;
        int ldi = (int)PQ;
        if (nb > 1) {
            float *blk = col + crs(a) * nc;
            group_pack(a, gy, n0, nb, blk, 1);
            in = blk;
            ldi = nc;
        }
        for (int g = 0; g < G; g++)
            sgemm(sgemm_precision_of(a->compute), 0, 1, Kg, (int)CgRS, nc, 1.0f, in + (int64_t)g * Kg * ldi, ldi, col + g * CgRS * nc,
                  nc, 1.0f, gw + g * Kg * CgRS, (int)CgRS);
    }
}

void cpu_conv2d_backward(const conv2d_args *a, const float *x, const float *w, const float *gy,
                         float *gx, float *gw, float *gb, float *work, int gx_acc) {
    const int64_t PQ = (int64_t)a->P * a->Q;
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
    if (gx) FOR_GROUPS(a, work, backward_data_group(a, n0, nb, w, gy, gx, col, par, gx_acc));
    if (gw) { /* one shared gw: groups in turn, in a fixed order */
        const int gi = group_images(a);
        for (int n0 = 0; n0 < a->N; n0 += gi)
            backward_filter_group(a, n0, a->N - n0 < gi ? a->N - n0 : gi, x, gy, gw, work);
    }
}
