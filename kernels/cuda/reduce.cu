/* reduce.cu — sum / mean / max over the middle axis of an (outer, len, inner) block, and the
 * backward pass. Mirrors cpu_reduce / cpu_reduce_backward (kernels/cpu): sums accumulate in double,
 * max keeps the first index of the largest value (argmax). */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define RED_THREADS 256

/* inner == 1: one block per row, contiguous reads. */
__global__ void k_reduce_rows(int op, int64_t len, const float *x, float *y, int32_t *argmax) {
    const float *row = x + (int64_t)blockIdx.x * len;
    if (op == RED_MAX) {
        float best = -INFINITY;
        int64_t bi = len; /* "none yet": loses every tie-break */
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            float v = row[j];
            if (v > best || bi == len) {
                best = v;
                bi = j;
            }
        }
        /* (value, index) reduction: larger value wins, the smaller index on ties. */
        __shared__ float sv[RED_THREADS];
        __shared__ int64_t si[RED_THREADS];
        sv[threadIdx.x] = best;
        si[threadIdx.x] = bi;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) {
                float ov = sv[threadIdx.x + s];
                int64_t oi = si[threadIdx.x + s];
                int64_t mi = si[threadIdx.x];
                if (oi < len && (mi == len || ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < mi))) {
                    sv[threadIdx.x] = ov;
                    si[threadIdx.x] = oi;
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            y[blockIdx.x] = sv[0];
            if (argmax) argmax[blockIdx.x] = (int32_t)si[0];
        }
        return;
    }
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += row[j];
    s = cu_block_sum_d(s);
    if (threadIdx.x == 0) y[blockIdx.x] = (float)(op == RED_MEAN ? s / (double)len : s);
}

/* inner > 1: one thread per (o, i), reads coalesced along i. */
__global__ void k_reduce_cols(int op, int64_t outer, int64_t len, int64_t inner, const float *x,
                              float *y, int32_t *argmax) {
    int64_t n = outer * inner;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = e / inner, i = e % inner;
        const float *p = x + o * len * inner + i;
        if (op == RED_MAX) {
            float best = len > 0 ? p[0] : -INFINITY;
            int32_t bi = 0;
            for (int64_t j = 1; j < len; j++) {
                float v = p[j * inner];
                if (v > best) {
                    best = v;
                    bi = (int32_t)j;
                }
            }
            y[e] = best;
            if (argmax) argmax[e] = bi;
        } else {
            double s = 0.0;
            for (int64_t j = 0; j < len; j++) s += p[j * inner];
            y[e] = (float)(op == RED_MEAN ? s / (double)len : s);
        }
    }
}

void cu_reduce(int op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y,
               int32_t *argmax) {
    if (outer <= 0 || inner <= 0) return;
    if (inner == 1 && outer <= 2147483647) {
        k_reduce_rows<<<(unsigned)outer, RED_THREADS, 0, cuda_stream()>>>(op, len, x, y, argmax);
    } else {
        k_reduce_cols<<<cuda_blocks(outer * inner, RED_THREADS), RED_THREADS, 0, cuda_stream()>>>(
            op, outer, len, inner, x, y, argmax);
    }
    CUDA_LAUNCHED("reduce");
}

__global__ void k_reduce_backward(int op, int64_t outer, int64_t len, int64_t inner, const float *gy,
                                  const int32_t *argmax, float *gx) {
    int64_t n = outer * len * inner;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e % inner, j = (e / inner) % len, o = e / (inner * len);
        int64_t yi = o * inner + i;
        float g = gy[yi];
        if (op == RED_MEAN) gx[e] += g * (1.0f / (float)len);
        else if (op == RED_SUM) gx[e] += g;
        else if (argmax[yi] == j) gx[e] += g;
    }
}

void cu_reduce_backward(int op, int64_t outer, int64_t len, int64_t inner, const float *gy,
                        const int32_t *argmax, float *gx) {
    int64_t n = outer * len * inner;
    if (n <= 0) return;
    k_reduce_backward<<<cuda_blocks(n, RED_THREADS), RED_THREADS, 0, cuda_stream()>>>(op, outer, len, inner,
                                                                                     gy, argmax, gx);
    CUDA_LAUNCHED("reduce_backward");
}
