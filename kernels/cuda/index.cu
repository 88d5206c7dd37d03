/* index.cu — gather / scatter-add along the middle axis of an (outer, L, inner) block.
 * Mirrors cpu_gather / cpu_scatter_add (kernels/cpu). scatter_add uses float atomics, so when an
 * index repeats the summation order (and the last bits) may differ from the CPU's serial order;
 * out-of-range indices are skipped (the op layer validates them before calling). */
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define IDX_THREADS 256

/* y[o, j, :] = x[o, idx[o * idx_stride + j], :] */
__global__ void k_gather(int64_t outer, int64_t L, int64_t inner, const float *x, const int32_t *idx,
                         int64_t idx_stride, int64_t K, float *y) {
    int64_t n = outer * K * inner;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e % inner, j = (e / inner) % K, o = e / (inner * K);
        int32_t src = idx[o * idx_stride + j];
        y[e] = src >= 0 && src < L ? x[(o * L + src) * inner + i] : 0.0f;
    }
}

void cu_gather(int64_t outer, int64_t L, int64_t inner, const float *x, const int32_t *idx,
               int64_t idx_stride, int64_t K, float *y) {
    int64_t n = outer * K * inner;
    if (n <= 0) return;
    k_gather<<<cuda_blocks(n, IDX_THREADS), IDX_THREADS, 0, cuda_stream()>>>(outer, L, inner, x, idx,
                                                                             idx_stride, K, y);
    CUDA_LAUNCHED("gather");
}

/* y[o, idx[o * idx_stride + j], :] += x[o, j, :] */
__global__ void k_scatter_add(int64_t outer, int64_t K, int64_t inner, const float *x,
                              const int32_t *idx, int64_t idx_stride, int64_t L, float *y) {
    int64_t n = outer * K * inner;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e % inner, j = (e / inner) % K, o = e / (inner * K);
        int32_t dst = idx[o * idx_stride + j];
        if (dst >= 0 && dst < L) atomicAdd(&y[(o * L + dst) * inner + i], x[e]);
    }
}

void cu_scatter_add(int64_t outer, int64_t K, int64_t inner, const float *x, const int32_t *idx,
                    int64_t idx_stride, int64_t L, float *y) {
    int64_t n = outer * K * inner;
    if (n <= 0) return;
    k_scatter_add<<<cuda_blocks(n, IDX_THREADS), IDX_THREADS, 0, cuda_stream()>>>(outer, K, inner, x, idx,
                                                                                  idx_stride, L, y);
    CUDA_LAUNCHED("scatter_add");
}
