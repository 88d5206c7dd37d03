/* bias.cu — a linear layer's bias on the device: bias + GELU forward and backward
 * (cpu_bias_gelu / cpu_bias_gelu_backward, kernels/cpu/bias_gelu.c) and the bias gradient of a
 * plain linear layer (cpu_bias_grad, kernels/cpu/bias_grad.c).
 *
 * All three walk a rows x cols matrix in the same tiles: a block owns BT_COLS columns (32 threads
 * of 2 adjacent columns: a bf16 pair is one 32-bit load, an fp32 pair one 64-bit load when cols is
 * even) and one chunk of rows, which its BT_ROWS thread rows stride over. No element index needs a
 * 64-bit modulo. The bias sums are the column sums of the chunk, added in double by each thread,
 * then over the thread rows in order in shared memory, written per chunk to the workspace; a
 * second kernel adds the chunks in order (deterministic, whatever the GPU). So the backward reads
 * its inputs once: no fp32 copy of a bf16 gradient, no fp32 GELU term buffer, and enough blocks for
 * the whole GPU (one block per 32 columns left most of an H100 idle: bench/RESULTS_cuda.md). */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define BT_COLS 64   /* columns of a block: 32 threads x 2 */
#define BT_ROWS 8    /* thread rows of a block */
#define BT_CHUNKS 64 /* row chunks of the bias sums at most */

/* row chunks: >= 4 rows per thread row, at most BT_CHUNKS */
static int bt_chunks(int64_t rows) {
    int64_t c = (rows + 4 * BT_ROWS - 1) / (4 * BT_ROWS);
    return (int)(c < 1 ? 1 : c > BT_CHUNKS ? BT_CHUNKS : c);
}

static dim3 bt_grid(int64_t cols, int chunks) { return dim3((unsigned)((cols + BT_COLS - 1) / BT_COLS), (unsigned)chunks); }

/* Whether rows can be read in aligned pairs: cols even and every buffer aligned to a pair of
 * elements (a view into a larger buffer may start anywhere); otherwise one element at a time */
static int bt_vec(int64_t cols, int dt, const void *a, const void *b, const void *c) {
    const uintptr_t m = (uintptr_t)(dt == ER_BF16 ? 4 : 8) - 1;
    return !(cols & 1) && !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & m);
}

/* elements i and i + 1 of a row (i even; has2: i + 1 is in the row, else b = 0; pair: has2 and the
 * row pairs are aligned, bt_vec, so the pair loads as one word) */
__device__ __forceinline__ void bt_load2(int dt, const void *x, int64_t i, int pair, int has2, float &a, float &b) {
    if (pair && dt == ER_BF16) {
        uint32_t u = ((const uint32_t *)x)[i >> 1];
        a = cu_bf16_to_f32((uint16_t)(u & 0xFFFFu));
        b = cu_bf16_to_f32((uint16_t)(u >> 16));
    } else if (pair) {
        float2 v = ((const float2 *)x)[i >> 1];
        a = v.x;
        b = v.y;
    } else {
        a = cu_load_f32(dt, x, i);
        b = has2 ? cu_load_f32(dt, x, i + 1) : 0.0f;
    }
}

/* store (or add to, rounding once) elements i and i + 1 (or i alone when !has2) */
__device__ __forceinline__ void bt_store2(int dt, void *y, int64_t i, int pair, int has2, float a, float b,
                                          int accumulate) {
    if (accumulate) {
        float oa, ob;
        bt_load2(dt, y, i, pair, has2, oa, ob);
        a += oa;
        b += ob;
    }
    if (pair && dt == ER_BF16) {
        ((uint32_t *)y)[i >> 1] = (uint32_t)cu_f32_to_bf16(a) | ((uint32_t)cu_f32_to_bf16(b) << 16);
    } else if (pair) {
        ((float2 *)y)[i >> 1] = make_float2(a, b);
    } else {
        cu_store_f32(dt, y, i, a);
        if (has2) cu_store_f32(dt, y, i + 1, b);
    }
}

/* the rows of chunk blockIdx.y: [r0, r1) */
__device__ __forceinline__ void bt_rows(int64_t rows, int64_t &r0, int64_t &r1) {
    int64_t per = (rows + gridDim.y - 1) / gridDim.y;
    r0 = blockIdx.y * per;
    r1 = r0 + per < rows ? r0 + per : rows;
}

/* the block's column sums s0, s1 (columns c, c + 1) over its thread rows, in order, into part[chunk] */
__device__ __forceinline__ void bt_chunk_sums(int64_t cols, int64_t c, double s0, double s1, double *part) {
    __shared__ double sh[BT_ROWS][BT_COLS];
    sh[threadIdx.y][2 * threadIdx.x] = s0;
    sh[threadIdx.y][2 * threadIdx.x + 1] = s1;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        for (int t = 1; t < BT_ROWS; t++) {
            s0 += sh[t][2 * threadIdx.x];
            s1 += sh[t][2 * threadIdx.x + 1];
        }
        double *p = part + (int64_t)blockIdx.y * cols;
        p[c] = s0;
        if (c + 1 < cols) p[c + 1] = s1;
    }
}

/* gb[j] += the chunks' sums, in chunk order */
__global__ void k_bias_chunks_sum(int64_t cols, int chunks, const double *part, float *gb) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols; j += (int64_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int k = 0; k < chunks; k++) s += part[(int64_t)k * cols + j];
        gb[j] += (float)s;
    }
}

static void bias_chunks_sum(int64_t cols, int chunks, const double *part, float *gb) {
    k_bias_chunks_sum<<<cuda_blocks(cols, 256), 256, 0, cuda_stream()>>>(cols, chunks, part, gb);
    CUDA_LAUNCHED("bias chunk sums");
}

/* ---- bias + GELU ---- */
__global__ void k_bias_gelu(int64_t rows, int64_t cols, int dt, const void *x, const float *b, void *y, int vec) {
    const int64_t c = ((int64_t)blockIdx.x * 32 + threadIdx.x) * 2;
    if (c >= cols) return;
    const int has2 = c + 1 < cols, pair = has2 && vec;
    const float b0 = b[c], b1 = has2 ? b[c + 1] : 0.0f;
    for (int64_t r = (int64_t)blockIdx.y * BT_ROWS + threadIdx.y; r < rows; r += (int64_t)gridDim.y * BT_ROWS) {
        float v0, v1;
        bt_load2(dt, x, r * cols + c, pair, has2, v0, v1);
        bt_store2(dt, y, r * cols + c, pair, has2, cu_gelu(v0 + b0), cu_gelu(v1 + b1), 0);
    }
}

void cu_bias_gelu(int64_t rows, int64_t cols, int dt, const void *x, const float *b, void *y) {
    if (rows <= 0 || cols <= 0) return;
    int64_t gy = (rows + BT_ROWS - 1) / BT_ROWS;
    dim3 th(32, BT_ROWS), grid((unsigned)((cols + BT_COLS - 1) / BT_COLS), (unsigned)(gy < 4096 ? gy : 4096));
    k_bias_gelu<<<grid, th, 0, cuda_stream()>>>(rows, cols, dt, x, b, y, bt_vec(cols, dt, x, y, NULL));
    CUDA_LAUNCHED("bias_gelu");
}

/* t = gelu'(x + b) gy into gx (written or added, rounded once), and the chunk's column sums of the
 * fp32 t into part when part is given */
__global__ void k_bias_gelu_backward(int64_t rows, int64_t cols, int dt, const void *x, const float *b,
                                     const void *gy, void *gx, double *part, int accumulate, int vec) {
    const int64_t c = ((int64_t)blockIdx.x * 32 + threadIdx.x) * 2;
    const int has2 = c + 1 < cols, pair = has2 && vec;
    int64_t r0, r1;
    bt_rows(rows, r0, r1);
    double s0 = 0.0, s1 = 0.0;
    if (c < cols) {
        const float b0 = b[c], b1 = has2 ? b[c + 1] : 0.0f;
        for (int64_t r = r0 + threadIdx.y; r < r1; r += BT_ROWS) {
            const int64_t i = r * cols + c;
            float x0, x1, g0, g1;
            bt_load2(dt, x, i, pair, has2, x0, x1);
            bt_load2(dt, gy, i, pair, has2, g0, g1);
            const float t0 = g0 * cu_gelu_grad(x0 + b0), t1 = has2 ? g1 * cu_gelu_grad(x1 + b1) : 0.0f;
            s0 += t0;
            s1 += t1;
            bt_store2(dt, gx, i, pair, has2, t0, t1, accumulate);
        }
    }
    if (part) bt_chunk_sums(cols, c, s0, s1, part);
}

/* the chunks' bias sums: one double (2 floats) per column and chunk */
size_t cu_bias_gelu_backward_workspace(int64_t rows, int64_t cols) { return (size_t)2 * bt_chunks(rows) * cols; }

void cu_bias_gelu_backward(int64_t rows, int64_t cols, int dt, const void *x, const float *b, const void *gy,
                           void *gx, float *gb, int accumulate, float *work) {
    if (rows <= 0 || cols <= 0) return;
    const int chunks = bt_chunks(rows);
    double *part = gb ? (double *)work : NULL;
    k_bias_gelu_backward<<<bt_grid(cols, chunks), dim3(32, BT_ROWS), 0, cuda_stream()>>>(rows, cols, dt, x, b, gy, gx,
                                                                                        part, accumulate,
                                                                                        bt_vec(cols, dt, x, gy, gx));
    CUDA_LAUNCHED("bias_gelu_backward");
    if (gb) bias_chunks_sum(cols, chunks, part, gb);
}

/* ---- the bias gradient: gb += column sums of g; g16 = bf16(g) on the way (g fp32) ---- */
__global__ void k_bias_grad(int64_t rows, int64_t cols, int dt, const void *g, uint16_t *g16, double *part, int vec) {
    const int64_t c = ((int64_t)blockIdx.x * 32 + threadIdx.x) * 2;
    const int has2 = c + 1 < cols, pair = has2 && vec;
    int64_t r0, r1;
    bt_rows(rows, r0, r1);
    double s0 = 0.0, s1 = 0.0;
    if (c < cols)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += BT_ROWS) {
            const int64_t i = r * cols + c;
            float v0, v1;
            bt_load2(dt, g, i, pair, has2, v0, v1);
            s0 += v0;
            s1 += v1;
            if (g16) bt_store2(ER_BF16, g16, i, pair, has2, v0, v1, 0);
        }
    if (part) bt_chunk_sums(cols, c, s0, s1, part);
}

size_t cu_bias_grad_workspace(int64_t rows, int64_t cols, int dt) { return (size_t)2 * bt_chunks(rows) * cols; }

void cu_bias_grad(int64_t rows, int64_t cols, int dt, const void *g, float *gb, uint16_t *g16, float *work) {
    if (rows <= 0 || cols <= 0 || (!gb && !g16)) return;
    const int chunks = bt_chunks(rows);
    double *part = gb ? (double *)work : NULL;
    k_bias_grad<<<bt_grid(cols, chunks), dim3(32, BT_ROWS), 0, cuda_stream()>>>(rows, cols, dt, g, g16, part,
                                                                                 bt_vec(cols, dt, g, NULL, NULL) &&
                                                                                     bt_vec(cols, ER_BF16, g16, NULL, NULL));
    CUDA_LAUNCHED("bias_grad");
    if (gb) bias_chunks_sum(cols, chunks, part, gb);
}
