/* pool.cu — max pooling with argmax and adaptive average pooling, forward and backward, one thread
 * per output (forward) or per input element (average backward, which gathers, so no atomics).
 * The max-pool backward scatters with atomicAdd (overlapping windows share inputs): the sum order
 * may differ from the CPU's in the last bit. Mirrors cpu_maxpool2d, cpu_maxpool2d_backward,
 * cpu_adaptive_avgpool2d and cpu_adaptive_avgpool2d_backward (kernels/cpu/pool.c). */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define POOL_THREADS 256

__global__ void k_maxpool(pool2d_args a, const float *x, float *y, int32_t *argmax, int64_t n) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        int q = (int)(o % a.Q), p = (int)(o / a.Q % a.P);
        int64_t pl = o / ((int64_t)a.P * a.Q);
        const float *xp = x + pl * a.H * a.W;
        int h0 = p * a.sh - a.ph, w0 = q * a.sw - a.pw;
        int r0 = h0 < 0 ? -h0 : 0, r1 = h0 + a.R > a.H ? a.H - h0 : a.R;
        int s0 = w0 < 0 ? -w0 : 0, s1 = w0 + a.S > a.W ? a.W - w0 : a.S;
        float m = -INFINITY;
        int32_t am = -1;
        for (int r = r0; r < r1; r++)
            for (int s = s0; s < s1; s++) {
                int32_t i = (h0 + r) * a.W + w0 + s;
                float v = xp[i];
                if (v > m || isnan(v) || am < 0) { /* first max wins ties; NaN propagates */
                    m = v;
                    am = i;
                }
            }
        y[o] = m;
        argmax[o] = am;
    }
}

void cu_maxpool2d(const pool2d_args *a, const float *x, float *y, int32_t *argmax) {
    int64_t n = (int64_t)a->N * a->C * a->P * a->Q;
    if (n <= 0) return;
    k_maxpool<<<cuda_blocks(n, POOL_THREADS), POOL_THREADS, 0, cuda_stream()>>>(*a, x, y, argmax, n);
    CUDA_LAUNCHED("maxpool2d");
}

__global__ void k_maxpool_bwd(int64_t n, int64_t PQ, int64_t HW, const float *gy, const int32_t *argmax,
                              float *gx) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x)
        if (argmax[o] >= 0) atomicAdd(gx + o / PQ * HW + argmax[o], gy[o]);
}

void cu_maxpool2d_backward(const pool2d_args *a, const float *gy, const int32_t *argmax, float *gx) {
    int64_t n = (int64_t)a->N * a->C * a->P * a->Q;
    if (n <= 0) return;
    k_maxpool_bwd<<<cuda_blocks(n, POOL_THREADS), POOL_THREADS, 0, cuda_stream()>>>(
        n, (int64_t)a->P * a->Q, (int64_t)a->H * a->W, gy, argmax, gx);
    CUDA_LAUNCHED("maxpool2d_backward");
}

/* PyTorch's adaptive window of output i of n over len inputs: [lo, hi). */
__device__ __forceinline__ int win_lo(int i, int n, int len) { return (int)((int64_t)i * len / n); }
__device__ __forceinline__ int win_hi(int i, int n, int len) { return (int)(((int64_t)(i + 1) * len + n - 1) / n); }

__global__ void k_adaptive_avg(int64_t n, int H, int W, int OH, int OW, const float *x, float *y) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        int j = (int)(o % OW), i = (int)(o / OW % OH);
        const float *xp = x + o / ((int64_t)OH * OW) * H * W;
        int h0 = win_lo(i, OH, H), h1 = win_hi(i, OH, H), w0 = win_lo(j, OW, W), w1 = win_hi(j, OW, W);
        double s = 0;
        for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) s += xp[(int64_t)h * W + w];
        y[o] = (float)(s / (double)((h1 - h0) * (w1 - w0)));
    }
}

void cu_adaptive_avgpool2d(int64_t NC, int H, int W, int OH, int OW, const float *x, float *y) {
    int64_t n = NC * OH * OW;
    if (n <= 0) return;
    k_adaptive_avg<<<cuda_blocks(n, POOL_THREADS), POOL_THREADS, 0, cuda_stream()>>>(n, H, W, OH, OW, x, y);
    CUDA_LAUNCHED("adaptive_avgpool2d");
}

/* Each input element sums the share of every output window containing it: the windows of outputs
 * floor(h OH / H) - 1 .. ceil((h + 1) OH / H), checked one by one (they may overlap). */
__global__ void k_adaptive_avg_bwd(int64_t n, int H, int W, int OH, int OW, const float *gy, float *gx) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int w = (int)(e % W), h = (int)(e / W % H);
        const float *gp = gy + e / ((int64_t)H * W) * OH * OW;
        int i0 = (int)((int64_t)h * OH / H) - 1, i1 = (int)(((int64_t)(h + 1) * OH + H - 1) / H) + 1;
        int j0 = (int)((int64_t)w * OW / W) - 1, j1 = (int)(((int64_t)(w + 1) * OW + W - 1) / W) + 1;
        float s = 0.0f;
        for (int i = i0 < 0 ? 0 : i0; i < (i1 > OH ? OH : i1); i++) {
            int h0 = win_lo(i, OH, H), h1 = win_hi(i, OH, H);
            if (h < h0 || h >= h1) continue;
            for (int j = j0 < 0 ? 0 : j0; j < (j1 > OW ? OW : j1); j++) {
                int w0 = win_lo(j, OW, W), w1 = win_hi(j, OW, W);
                if (w < w0 || w >= w1) continue;
                s += gp[(int64_t)i * OW + j] / (float)((h1 - h0) * (w1 - w0));
            }
        }
        gx[e] += s;
    }
}

void cu_adaptive_avgpool2d_backward(int64_t NC, int H, int W, int OH, int OW, const float *gy, float *gx) {
    int64_t n = NC * H * W;
    if (n <= 0) return;
    k_adaptive_avg_bwd<<<cuda_blocks(n, POOL_THREADS), POOL_THREADS, 0, cuda_stream()>>>(n, H, W, OH, OW, gy, gx);
    CUDA_LAUNCHED("adaptive_avgpool2d_backward");
}
