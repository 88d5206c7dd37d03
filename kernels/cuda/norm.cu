/* norm.cu — row kernels over (rows, cols) contiguous data: layernorm, softmax / log-softmax,
 * L2 normalisation, cross-entropy, forward and backward. One block per row (the layernorm forward of
 * rows up to 1024: one warp per row, k_layernorm_warp); row statistics are
 * accumulated in double (as the CPU kernels do) and combined with a warp-tree reduction, so results
 * match kernels/cpu within ~1e-6 relative. Mirrors cpu_layernorm, cpu_layernorm_backward,
 * cpu_softmax, cpu_softmax_backward, cpu_l2norm, cpu_l2norm_backward, cpu_cross_entropy,
 * cpu_cross_entropy_backward. */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define ROW_THREADS 256

static inline bool rows_ok(int64_t rows, const char *what) {
    if (rows > 2147483647) {
        cuda_record_msg(what, __FILE__, __LINE__);
        return false;
    }
    return rows > 0;
}

/* ---- layernorm ----
 * x (and gx) of storage type xt, y (and gy) of type yt (kernels/ops.def); loads widen, stores round
 * once (cuda_common.h), so a bf16 call is the fp32 computation on the widened values, rounded. */
__global__ void k_layernorm(int64_t cols, int xt, const void *x, const float *w, const float *b, float eps,
                            int yt, void *y, float *mean, float *rstd) {
    int64_t r = blockIdx.x, o = r * cols;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += cu_load_f32(xt, x, o + j);
    float m = (float)(cu_block_sum_d(s) / (double)cols);
    double q = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        double d = cu_load_f32(xt, x, o + j) - m; /* float difference, as cpu_layernorm */
        q += d * d;
    }
    double var = cu_block_sum_d(q) / (double)cols;
    float rs = (float)(1.0 / sqrt(var + eps));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = (cu_load_f32(xt, x, o + j) - m) * rs;
        if (w) v *= w[j];
        if (b) v += b[j];
        cu_store_f32(yt, y, o + j, v);
    }
    if (threadIdx.x == 0) {
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = rs;
    }
}

/* The same row computation with one warp per row (LN_WARP_ROWS rows a block) and the row in
 * registers, NPL elements a lane (element lane + 32 k), for rows of at most 32 * LN_NPL_MAX: a ViT's
 * 384-1024 channels (a block per row gives each of its 256 threads 2-8 elements between the barriers
 * of two block reductions; a warp reduces with shuffles only). Each element is loaded once. The
 * layernorm forward of a ViT-L/16 MAE b64 step on the H200 went from 2.35 to
 * 1.74 ms (bench/RESULTS_cuda.md, session 18); the backward stays on the block kernels (see there). */
#define LN_WARP_ROWS 8
#define LN_NPL_MAX 32
template <int NPL>
__global__ void k_layernorm_warp(int64_t rows, int64_t cols, int xt, const void *x, const float *w, const float *b,
                                 float eps, int yt, void *y, float *mean, float *rstd) {
    const int64_t r = (int64_t)blockIdx.x * LN_WARP_ROWS + (threadIdx.x >> 5), o = r * cols;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return; /* the whole warp: no shuffle is left waiting */
    float v[NPL];
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        const int64_t j = lane + 32 * k;
        v[k] = j < cols ? cu_load_f32(xt, x, o + j) : 0.0f;
        s += v[k];
    }
    const float m = (float)(cu_warp_sum_d(s) / (double)cols);
    double q = 0.0;
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        double d = v[k] - m; /* float difference, as cpu_layernorm */
        if (lane + 32 * k < cols) q += d * d;
    }
    const float rs = (float)(1.0 / sqrt(cu_warp_sum_d(q) / (double)cols + eps));
#pragma unroll
    for (int k = 0; k < NPL; k++) {
        const int64_t j = lane + 32 * k;
        if (j >= cols) break;
        float t = (v[k] - m) * rs;
        if (w) t *= w[j];
        if (b) t += b[j];
        cu_store_f32(yt, y, o + j, t);
    }
    if (lane == 0) {
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = rs;
    }
}

static unsigned ln_warp_blocks(int64_t rows) { return (unsigned)((rows + LN_WARP_ROWS - 1) / LN_WARP_ROWS); }

/* the register kernels' instance for cols: NPL of 2, 4, 8, 12, 16, 24 or 32; 0 past 1024 columns */
static int ln_npl(int64_t cols) {
    const int need = (int)((cols + 31) / 32), sizes[7] = {2, 4, 8, 12, 16, 24, 32};
    if (cols > 32 * LN_NPL_MAX) return 0;
    for (int i = 0; i < 7; i++)
        if (need <= sizes[i]) return sizes[i];
    return 0;
}

void cu_layernorm(int64_t rows, int64_t cols, int xt, const void *x, const float *w, const float *b,
                  float eps, int yt, void *y, float *mean, float *rstd) {
    if (!rows_ok(rows, "layernorm: too many rows")) return;
#define LN_WARP(n) \
    k_layernorm_warp<n><<<ln_warp_blocks(rows), 32 * LN_WARP_ROWS, 0, cuda_stream()>>>(rows, cols, xt, x, w, b, eps, yt, y, mean, rstd)
    switch (ln_npl(cols)) {
    case 0: k_layernorm<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, xt, x, w, b, eps, yt, y, mean, rstd); break;
    case 2: LN_WARP(2); break;
    case 4: LN_WARP(4); break;
    case 8: LN_WARP(8); break;
    case 12: LN_WARP(12); break;
    case 16: LN_WARP(16); break;
    case 24: LN_WARP(24); break;
    default: LN_WARP(32); break;
    }
#undef LN_WARP
    CUDA_LAUNCHED("layernorm");
}

/* gx += rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)), xh = (x - mean) * rstd, dxh = gy * w */
__global__ void k_layernorm_bwd_x(int64_t cols, int xt, const void *x, const float *w, const float *mean,
                                  const float *rstd, int gt, const void *gy, void *gx) {
    int64_t r = blockIdx.x, o = r * cols;
    float m = mean[r], rs = rstd[r];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = (cu_load_f32(xt, x, o + j) - m) * rs, g = cu_load_f32(gt, gy, o + j);
        float d = w ? g * w[j] : g;
        s1 += d;
        s2 += (double)d * xh;
    }
    float a = (float)(cu_block_sum_d(s1) / (double)cols);
    float c = (float)(cu_block_sum_d(s2) / (double)cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = (cu_load_f32(xt, x, o + j) - m) * rs, g = cu_load_f32(gt, gy, o + j);
        float d = w ? g * w[j] : g;
        cu_add_f32(xt, gx, o + j, rs * (d - a - xh * c));
    }
}

/* gw[j] += sum_r gy[r, j] * xh[r, j], gb[j] += sum_r gy[r, j] in two passes: a block owns 32
 * columns of one chunk of rows (its 16 thread rows stride over the chunk, coalesced) and writes the
 * chunk's partial sums (double) to the workspace; then one thread per column adds the chunks in
 * order (deterministic). One block per 32 columns alone left most of an H100 idle: ViT-L's 1024
 * columns are 32 blocks for 132 multiprocessors (11 ms of a 140 ms MAE step, bench/RESULTS_cuda.md). */
#define LNW_COLS 32
#define LNW_ROWS 16
#define LNW_CHUNKS 64 /* row chunks at most */
static int lnw_chunks(int64_t rows) {
    int64_t c = (rows + 4 * LNW_ROWS - 1) / (4 * LNW_ROWS); /* >= 4 rows per thread row */
    return (int)(c < 1 ? 1 : c > LNW_CHUNKS ? LNW_CHUNKS : c);
}
__global__ void k_layernorm_bwd_wb_part(int64_t rows, int64_t cols, int xt, const void *x, const float *mean,
                                        const float *rstd, int gt, const void *gy, double *part) {
    __shared__ double sw[LNW_ROWS][LNW_COLS], sb[LNW_ROWS][LNW_COLS];
    int64_t j = (int64_t)blockIdx.x * LNW_COLS + threadIdx.x;
    int64_t per = (rows + gridDim.y - 1) / gridDim.y, r0 = blockIdx.y * per, r1 = r0 + per < rows ? r0 + per : rows;
    double aw = 0.0, ab = 0.0;
    if (j < cols) {
        for (int64_t r = r0 + threadIdx.y; r < r1; r += LNW_ROWS) {
            float g = cu_load_f32(gt, gy, r * cols + j);
            aw += (double)g * ((cu_load_f32(xt, x, r * cols + j) - mean[r]) * rstd[r]);
            ab += g;
        }
    }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        for (int t = 1; t < LNW_ROWS; t++) {
            aw += sw[t][threadIdx.x];
            ab += sb[t][threadIdx.x];
        }
        part[(int64_t)blockIdx.y * 2 * cols + j] = aw;
        part[(int64_t)blockIdx.y * 2 * cols + cols + j] = ab;
    }
}
__global__ void k_layernorm_bwd_wb_sum(int64_t cols, int chunks, const double *part, float *gw, float *gb) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols; j += (int64_t)gridDim.x * blockDim.x) {
        double aw = 0.0, ab = 0.0;
        for (int c = 0; c < chunks; c++) {
            aw += part[(int64_t)c * 2 * cols + j];
            ab += part[(int64_t)c * 2 * cols + cols + j];
        }
        if (gw) gw[j] += (float)aw;
        if (gb) gb[j] += (float)ab;
    }
}

/* the chunks' partial sums: 2 doubles per column and chunk (4 floats) */
size_t cu_layernorm_backward_workspace(int64_t rows, int64_t cols) { return (size_t)4 * lnw_chunks(rows) * cols; }

/* The backward keeps a block per row for gx: a warp per row was slower on the H200 (ViT-B/16 MAE
 * b128, bench/RESULTS_cuda.md session 18: 5.5 ms a step with the row in registers, 12.4 ms with
 * gw / gb fused in, 4.5 ms this way), unlike the forward. */
void cu_layernorm_backward(int64_t rows, int64_t cols, int xt, const void *x, const float *w,
                           const float *mean, const float *rstd, int gt, const void *gy, void *gx,
                           float *gw, float *gb, float *work) {
    if (!rows_ok(rows, "layernorm_backward: too many rows")) return;
    if (gx)
        k_layernorm_bwd_x<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, xt, x, w, mean, rstd, gt, gy, gx);
    if (gw || gb) {
        int chunks = lnw_chunks(rows);
        dim3 th(LNW_COLS, LNW_ROWS), grid((unsigned)((cols + LNW_COLS - 1) / LNW_COLS), (unsigned)chunks);
        k_layernorm_bwd_wb_part<<<grid, th, 0, cuda_stream()>>>(rows, cols, xt, x, mean, rstd, gt, gy, (double *)work);
        k_layernorm_bwd_wb_sum<<<cuda_blocks(cols, 256), 256, 0, cuda_stream()>>>(cols, chunks, (const double *)work, gw, gb);
    }
    CUDA_LAUNCHED("layernorm_backward");
}

/* ---- softmax / log-softmax ---- */
__global__ void k_softmax(int64_t cols, const float *x, float *y, int log) {
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, xr[j]);
    mx = cu_block_max(mx);
    if (mx == -INFINITY) mx = 0.0f; /* all -inf: keep it finite (as cpu_softmax) */
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - mx);
    s = cu_block_sum_d(s);
    if (log) {
        float lse = mx + logf((float)s);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] - lse;
    } else {
        float inv = s > 0.0 ? (float)(1.0 / s) : 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - mx) * inv;
    }
}

void cu_softmax(int64_t rows, int64_t cols, const float *x, float *y, int log) {
    if (!rows_ok(rows, "softmax: too many rows")) return;
    k_softmax<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, x, y, log);
    CUDA_LAUNCHED("softmax");
}

/* softmax: gx += y * (gy - sum(gy * y));  log-softmax: gx += gy - exp(y) * sum(gy) */
__global__ void k_softmax_backward(int64_t cols, const float *y, const float *gy, float *gx, int log) {
    int64_t r = blockIdx.x;
    const float *yr = y + r * cols, *gr = gy + r * cols;
    float *gxr = gx + r * cols;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += log ? (double)gr[j] : (double)gr[j] * yr[j];
    float d = (float)cu_block_sum_d(s);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        gxr[j] += log ? gr[j] - expf(yr[j]) * d : yr[j] * (gr[j] - d);
}

void cu_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                         int log) {
    if (!rows_ok(rows, "softmax_backward: too many rows")) return;
    k_softmax_backward<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, y, gy, gx, log);
    CUDA_LAUNCHED("softmax_backward");
}

/* ---- L2 normalisation: y = x / max(||x||, eps), norm = ||x|| ---- */
__global__ void k_l2norm(int64_t cols, const float *x, float *y, float *norm, float eps) {
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += (double)xr[j] * xr[j];
    float n = (float)sqrt(cu_block_sum_d(s));
    float inv = 1.0f / (n > eps ? n : eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[r * cols + j] = xr[j] * inv;
    if (threadIdx.x == 0 && norm) norm[r] = n;
}

void cu_l2norm(int64_t rows, int64_t cols, const float *x, float *y, float *norm, float eps) {
    if (!rows_ok(rows, "l2norm: too many rows")) return;
    k_l2norm<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, x, y, norm, eps);
    CUDA_LAUNCHED("l2norm");
}

/* norm > eps: gx += (gy - y * <y, gy>) / norm;  else (y = x / eps): gx += gy / eps */
__global__ void k_l2norm_backward(int64_t cols, const float *y, const float *norm, const float *gy,
                                  float *gx, float eps) {
    int64_t r = blockIdx.x;
    const float *yr = y + r * cols, *gr = gy + r * cols;
    float *gxr = gx + r * cols;
    float n = norm[r];
    if (!(n > eps)) {
        float inv = 1.0f / eps;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) gxr[j] += gr[j] * inv;
        return;
    }
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += (double)yr[j] * gr[j];
    float d = (float)cu_block_sum_d(s), inv = 1.0f / n;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) gxr[j] += (gr[j] - yr[j] * d) * inv;
}

void cu_l2norm_backward(int64_t rows, int64_t cols, const float *y, const float *norm,
                        const float *gy, float *gx, float eps) {
    if (!rows_ok(rows, "l2norm_backward: too many rows")) return;
    k_l2norm_backward<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, y, norm, gy, gx, eps);
    CUDA_LAUNCHED("l2norm_backward");
}

/* ---- cross-entropy: loss = logsumexp(x) - x[label] (0 where label < 0), lse saved ---- */
__global__ void k_cross_entropy(int64_t cols, const float *x, const int32_t *label, float *loss,
                                float *lse) {
    int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, xr[j]);
    mx = cu_block_max(mx);
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += exp((double)xr[j] - mx);
    s = cu_block_sum_d(s);
    if (threadIdx.x == 0) {
        double l = (double)mx + ::log(s);
        int32_t lab = label[r];
        if (lse) lse[r] = (float)l;
        loss[r] = lab >= 0 && lab < cols ? (float)(l - xr[lab]) : 0.0f;
    }
}

void cu_cross_entropy(int64_t rows, int64_t cols, const float *x, const int32_t *label, float *loss,
                      float *lse) {
    if (!rows_ok(rows, "cross_entropy: too many rows")) return;
    k_cross_entropy<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, x, label, loss, lse);
    CUDA_LAUNCHED("cross_entropy");
}

__global__ void k_cross_entropy_backward(int64_t cols, const float *x, const int32_t *label,
                                         const float *lse, const float *gy, float denom, float *gx) {
    int64_t r = blockIdx.x;
    int32_t lab = label[r];
    if (lab < 0) return;
    const float scale = gy[0] / denom; /* cpu_cross_entropy_backward's one IEEE division */
    const float *xr = x + r * cols;
    float *gxr = gx + r * cols;
    float l = lse[r];
    /* same rounding as cpu_cross_entropy_backward: += scale * p, then -= scale at the label */
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = gxr[j] + scale * expf(xr[j] - l);
        gxr[j] = j == lab ? v - scale : v;
    }
}

void cu_cross_entropy_backward(int64_t rows, int64_t cols, const float *x, const int32_t *label,
                               const float *lse, const float *gy, float denom, float *gx) {
    if (!rows_ok(rows, "cross_entropy_backward: too many rows")) return;
    k_cross_entropy_backward<<<(unsigned)rows, ROW_THREADS, 0, cuda_stream()>>>(cols, x, label, lse, gy, denom, gx);
    CUDA_LAUNCHED("cross_entropy_backward");
}
