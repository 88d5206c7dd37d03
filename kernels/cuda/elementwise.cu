/* elementwise.cu — fill, strided copy, sum_to (un-broadcast), binary/unary ops and their
 * gradients, dropout. Mirrors kernels/cpu/backend_cpu.c (cpu_fill, cpu_copy_strided, cpu_sum_to)
 * and kernels/cpu's cpu_binary, cpu_binary_grad, cpu_unary, cpu_unary_backward, cpu_dropout.
 * Strided operands are coalesced on the host exactly like cpu_coalesce, so the linear index of an
 * element is the same on both backends (the contiguous output is written at that index). */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "nn/base/philox.h"

#define EW_THREADS 256

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- fill / copy_strided (cpu_fill, cpu_copy_strided) ---- */
__global__ void k_fill(float *y, int64_t n, float v) {
    GRID_STRIDE(i, n) y[i] = v;
}

void cu_fill(float *y, int64_t n, float v) {
    if (n <= 0) return;
    k_fill<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(y, n, v);
    CUDA_LAUNCHED("fill");
}

__global__ void k_copy_strided(cu_index ix, int64_t n, const float *x, float *y, int accumulate) {
    GRID_STRIDE(e, n) {
        int64_t off[2];
        cu_offsets<2>(ix, e, off);
        float v = x[off[0]];
        if (accumulate) y[off[1]] += v;
        else y[off[1]] = v;
    }
}

void cu_copy_strided(int ndim, const int64_t *shape, const float *x, const int64_t *xs, float *y,
                     const int64_t *ys, int accumulate) {
    int64_t n = cu_numel(ndim, shape);
    if (n <= 0) return;
    const int64_t *st[2] = {xs, ys};
    cu_index ix = cu_index_make(ndim, shape, st, 2);
    k_copy_strided<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(ix, n, x, y, accumulate);
    CUDA_LAUNCHED("copy_strided");
}

/* ---- sum_to (cpu_sum_to): y element e sums x over the box of reduced dims, in double ---- */
struct sum_to_plan {
    int nkeep, nred;
    int64_t keep_n[ER_MAX_DIMS], keep_s[ER_MAX_DIMS]; /* kept dims: extent, x stride */
    int64_t red_n[ER_MAX_DIMS], red_s[ER_MAX_DIMS];   /* reduced dims: extent, x stride */
};

__device__ __forceinline__ int64_t sum_to_base(const sum_to_plan &p, int64_t e) {
    int64_t base = 0;
    for (int k = p.nkeep - 1; k >= 0; k--) {
        base += (e % p.keep_n[k]) * p.keep_s[k];
        e /= p.keep_n[k];
    }
    return base;
}
__device__ __forceinline__ int64_t sum_to_off(const sum_to_plan &p, int64_t b) {
    int64_t off = 0;
    for (int k = p.nred - 1; k >= 0; k--) {
        off += (b % p.red_n[k]) * p.red_s[k];
        b /= p.red_n[k];
    }
    return off;
}

/* One thread per output (many outputs, e.g. a bias gradient): reads of a warp are coalesced
 * along the kept innermost dim. */
__global__ void k_sum_to_thread(sum_to_plan p, int64_t ny, int64_t nbox, const float *x, float *y,
                                int accumulate) {
    GRID_STRIDE(e, ny) {
        int64_t base = sum_to_base(p, e);
        double s = 0.0;
        for (int64_t b = 0; b < nbox; b++) s += x[base + sum_to_off(p, b)];
        y[e] = accumulate ? y[e] + (float)s : (float)s;
    }
}

/* One block per output (few outputs over large boxes, e.g. a sum to a scalar). */
__global__ void k_sum_to_block(sum_to_plan p, int64_t nbox, const float *x, float *y, int accumulate) {
    int64_t e = blockIdx.x;
    int64_t base = sum_to_base(p, e);
    double s = 0.0;
    for (int64_t b = threadIdx.x; b < nbox; b += blockDim.x) s += x[base + sum_to_off(p, b)];
    s = cu_block_sum_d(s);
    if (threadIdx.x == 0) y[e] = accumulate ? y[e] + (float)s : (float)s;
}

/* Column sums (the bias-gradient case, cpu_sum_to's fast path): a block owns 32 columns, its 32
 * thread rows stride over the data rows with coalesced reads, then combine in shared memory. */
#define CS_COLS 32
#define CS_ROWS 32
__global__ void k_colsum(int64_t rows, int64_t cols, const float *x, float *y, int accumulate) {
    __shared__ double part[CS_ROWS][CS_COLS + 1];
    int64_t c = (int64_t)blockIdx.x * CS_COLS + threadIdx.x;
    double s = 0.0;
    if (c < cols)
        for (int64_t r = threadIdx.y; r < rows; r += CS_ROWS) s += x[r * cols + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int t = 1; t < CS_ROWS; t++) s += part[t][threadIdx.x];
        y[c] = accumulate ? y[c] + (float)s : (float)s;
    }
}

/* The column sums reduce in shared memory: no scratch. */
size_t cu_sum_to_workspace(int ndim, const int64_t *xshape, const int64_t *yshape) { return 0; }

void cu_sum_to(int ndim, const int64_t *xshape, const float *x, const int64_t *yshape, float *y,
               int accumulate, float *work) {
    /* y keeps a suffix of x's dims and is 1 on the leading ones: a column sum */
    int lead = 0;
    while (lead < ndim && yshape[lead] == 1) lead++;
    int suffix_ok = lead > 0;
    for (int i = lead; i < ndim; i++)
        if (yshape[i] != xshape[i]) suffix_ok = 0;
    if (suffix_ok) {
        int64_t rows = 1, cols = 1;
        for (int i = 0; i < lead; i++) rows *= xshape[i];
        for (int i = lead; i < ndim; i++) cols *= xshape[i];
        if (cols >= 32 && rows > 1) {
            dim3 th(CS_COLS, CS_ROWS);
            k_colsum<<<(unsigned)((cols + CS_COLS - 1) / CS_COLS), th, 0, cuda_stream()>>>(rows, cols, x, y,
                                                                                         accumulate);
            CUDA_LAUNCHED("sum_to (columns)");
            return;
        }
    }
    sum_to_plan p;
    p.nkeep = p.nred = 0;
    int64_t xs[ER_MAX_DIMS], acc = 1, ny = 1, nx = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        xs[i] = acc;
        acc *= xshape[i];
    }
    for (int i = 0; i < ndim; i++) {
        nx *= xshape[i];
        ny *= yshape[i];
        if (yshape[i] == 1 && xshape[i] != 1) {
            p.red_n[p.nred] = xshape[i];
            p.red_s[p.nred++] = xs[i];
        } else {
            p.keep_n[p.nkeep] = xshape[i];
            p.keep_s[p.nkeep++] = xs[i];
        }
    }
    if (ny <= 0) return;
    int64_t nbox = nx / ny;
    if (ny < 2048 && nbox >= 256 && ny <= 2147483647) {
        k_sum_to_block<<<(unsigned)ny, 256, 0, cuda_stream()>>>(p, nbox, x, y, accumulate);
    } else {
        k_sum_to_thread<<<cuda_blocks(ny, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(p, ny, nbox, x,
                                                                                      y, accumulate);
    }
    CUDA_LAUNCHED("sum_to");
}

/* ---- binary (cpu_binary, cpu_binary_grad) ---- */
__device__ __forceinline__ float bin_apply(int op, float a, float b) {
    switch (op) {
    case BIN_ADD: return a + b;
    case BIN_SUB: return a - b;
    case BIN_MUL: return a * b;
    default: return a / b;
    }
}

/* d(a op b)/d(side) * gy */
__device__ __forceinline__ float bin_grad(int op, int side, float a, float b, float gy) {
    switch (op) {
    case BIN_ADD: return gy;
    case BIN_SUB: return side ? -gy : gy;
    case BIN_MUL: return side ? gy * a : gy * b;
    default: return side ? -gy * a / (b * b) : gy / b;
    }
}

__global__ void k_binary(int op, cu_index ix, int64_t n, const float *a, const float *b, float *y) {
    GRID_STRIDE(e, n) {
        int64_t off[2];
        cu_offsets<2>(ix, e, off);
        y[e] = bin_apply(op, a[off[0]], b[off[1]]);
    }
}

__global__ void k_binary_grad(int op, int side, cu_index ix, int64_t n, const float *a,
                              const float *b, const float *gy, float *g, int accumulate) {
    GRID_STRIDE(e, n) {
        int64_t off[2];
        cu_offsets<2>(ix, e, off);
        /* ADD/SUB never read the operands (they may be NULL). */
        float av = (op == BIN_MUL || op == BIN_DIV) && a ? a[off[0]] : 0.0f;
        float bv = (op == BIN_MUL || op == BIN_DIV) && b ? b[off[1]] : 1.0f;
        float v = bin_grad(op, side, av, bv, gy[e]);
        g[e] = accumulate ? g[e] + v : v;
    }
}

/* Coalesce a's and b's strides together with the contiguous output's, so that the output's
 * linear index is unchanged. */
static cu_index binary_index(int ndim, const int64_t *shape, const int64_t *as, const int64_t *bs) {
    int64_t cs[ER_MAX_DIMS], acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        cs[i] = acc;
        acc *= shape[i];
    }
    static const int64_t zeros[ER_MAX_DIMS] = {0};
    const int64_t *st[3] = {as ? as : zeros, bs ? bs : zeros, cs};
    return cu_index_make(ndim, shape, st, 3);
}

void cu_binary(int op, int ndim, const int64_t *shape, const float *a, const int64_t *as,
               const float *b, const int64_t *bs, float *y) {
    int64_t n = cu_numel(ndim, shape);
    if (n <= 0) return;
    cu_index ix = binary_index(ndim, shape, as, bs);
    k_binary<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(op, ix, n, a, b, y);
    CUDA_LAUNCHED("binary");
}

void cu_binary_grad(int op, int side, int ndim, const int64_t *shape, const float *a,
                    const int64_t *as, const float *b, const int64_t *bs, const float *gy, float *g,
                    int accumulate) {
    int64_t n = cu_numel(ndim, shape);
    if (n <= 0) return;
    cu_index ix = binary_index(ndim, shape, as, bs);
    k_binary_grad<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(op, side, ix, n, a, b,
                                                                                gy, g, accumulate);
    CUDA_LAUNCHED("binary_grad");
}

/* ---- unary (cpu_unary, cpu_unary_backward) ---- */
__device__ __forceinline__ float un_apply(int op, float x, float alpha, float beta) {
    switch (op) {
    case UN_AFFINE: return alpha * x + beta;
    case UN_EXP: return expf(x);
    case UN_LOG: return logf(x);
    case UN_SQRT: return sqrtf(x);
    case UN_ABS: return fabsf(x);
    case UN_POW: return powf(x, alpha);
    case UN_CLAMP: return x < alpha ? alpha : (x > beta ? beta : x);
    case UN_GELU: return cu_gelu(x);
    case UN_RELU: return x > 0.0f ? x : 0.0f;
    case UN_SIGMOID: return 1.0f / (1.0f + expf(-x));
    default: return tanhf(x);
    }
}

/* gx increment f'(x) * g, given x (v), y = f(x) (w) and g: the expressions of cpu_unary_backward. */
__device__ __forceinline__ float un_grad(int op, float v, float w, float g, float alpha, float beta) {
    switch (op) {
    case UN_AFFINE: return alpha * g;
    case UN_EXP: return g * w;
    case UN_LOG: return g / v;
    case UN_SQRT: return g * 0.5f / w;
    case UN_ABS: return v > 0.0f ? g : (v < 0.0f ? -g : 0.0f);
    case UN_POW: return g * alpha * powf(v, alpha - 1.0f);
    case UN_CLAMP: return v > alpha && v < beta ? g : 0.0f;
    case UN_GELU: return g * cu_gelu_grad(v);
    case UN_RELU: return v > 0.0f ? g : 0.0f;
    case UN_SIGMOID: return g * w * (1.0f - w);
    default: return g * (1.0f - w * w);
    }
}

__global__ void k_unary(int op, int64_t n, const float *x, float *y, float alpha, float beta) {
    GRID_STRIDE(i, n) y[i] = un_apply(op, x[i], alpha, beta);
}

__global__ void k_unary_backward(int op, int64_t n, const float *x, const float *y, const float *gy,
                                 float *gx, float alpha, float beta, int accumulate) {
    GRID_STRIDE(i, n) {
        float xv = x ? x[i] : 0.0f;
        /* exp/sqrt/sigmoid/tanh use y; recompute it when not given */
        float yv = y ? y[i] : un_apply(op, xv, alpha, beta);
        gx[i] = (accumulate ? gx[i] : 0.0f) + un_grad(op, xv, yv, gy[i], alpha, beta);
    }
}

void cu_unary(int op, int64_t n, const float *x, float *y, float alpha, float beta) {
    if (n <= 0) return;
    k_unary<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(op, n, x, y, alpha, beta);
    CUDA_LAUNCHED("unary");
}

void cu_unary_backward(int op, int64_t n, const float *x, const float *y, const float *gy, float *gx,
                       float alpha, float beta, int accumulate) {
    if (n <= 0) return;
    k_unary_backward<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(op, n, x, y, gy, gx,
                                                                                   alpha, beta, accumulate);
    CUDA_LAUNCHED("unary_backward");
}

/* ---- dropout (cpu_dropout): keep_i = rng_at(seed, stream, offset + i) >= p * 2^32 ----
 * One thread per Philox block of 4 consecutive counter indices, so each block is computed once. */
__global__ void k_dropout(int64_t n, const float *x, float *y, float p, float scale, uint64_t seed,
                          uint64_t stream, uint64_t offset, int accumulate) {
    /* the CPU's integer threshold: floor(p * 2^32), 2^32 (drop all) for p >= 1 */
    const double thr_d = (double)p * 4294967296.0;
    const uint64_t thr = thr_d >= 4294967296.0 ? 4294967296ull : (uint64_t)thr_d;
    uint64_t first_block = offset >> 2;
    int64_t nblocks = (int64_t)(((offset + (uint64_t)n + 3) >> 2) - first_block);
    GRID_STRIDE(t, nblocks) {
        uint64_t blk = first_block + (uint64_t)t;
        uint32_t v[4];
        philox_block(seed, stream, blk, v);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int64_t i = (int64_t)(blk * 4 + j - offset); /* wraps to a huge value below offset */
            if (blk * 4 + j < offset || i >= n) continue;
            float out = x[i] * ((uint64_t)v[j] >= thr ? scale : 0.0f); /* NaN stays NaN, as on the CPU */
            if (accumulate) y[i] += out;
            else y[i] = out;
        }
    }
}

void cu_dropout(int64_t n, const float *x, float *y, float p, uint64_t seed, uint64_t stream,
                uint64_t offset, int accumulate) {
    if (n <= 0) return;
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    int64_t nblocks = (int64_t)(((offset + (uint64_t)n + 3) >> 2) - (offset >> 2));
    k_dropout<<<cuda_blocks(nblocks, EW_THREADS), EW_THREADS, 0, cuda_stream()>>>(
        n, x, y, p, scale, seed, stream, offset, accumulate);
    CUDA_LAUNCHED("dropout");
}
