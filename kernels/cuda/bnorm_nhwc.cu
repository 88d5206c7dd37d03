/* bnorm_nhwc.cu — batch norm of channels-last activations (rows [M, C], fp32 or bf16 storage) with the
 * ResNet block's residual add and ReLU fused, forward and backward; mirrors kernels/cpu/bnorm_nhwc.c.
 *
 * Layout of every pass: a block of BN_TX x BN_TY threads covers BN_CT = 2 BN_TX adjacent channels
 * (two per thread, so a warp reads 64 consecutive elements of a row: coalesced for either dtype) and
 * a chunk of BN_RB rows (thread row y takes rows y, y + BN_TY, ...). The grid is (channel tiles,
 * row chunks), so even C = 64 with many rows fills the GPU.
 *
 * Reductions are deterministic, without atomics: each block writes its fp32 per-channel partial
 * sums of its chunk (fixed order: rows in turn, then the BN_TY slices in turn) and a second small
 * kernel adds the chunks' partials per channel in double, in chunk order. Statistics in two passes
 * (the mean, then the sum of squared deviations from it), as the CPU.
 *
 * Scratch of the forward: batchnorm_nhwc has no workspace argument, so the partials of the statistics
 * (chunks x C floats, see bn_part) live in y before y is written: y must not overlap x or z. With one
 * chunk they live in rstd instead. */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define BN_TX 32
#define BN_TY 8
#define BN_CT (2 * BN_TX)
#define BN_RB 64
#define BN_MAX_CHUNKS 32768 /* gridDim.y <= 65535 */

/* Rows per chunk: BN_RB, doubled until the chunks fit the grid (M past 2^21 rows). */
static inline int64_t bn_rows(int64_t M) {
    int64_t rb = BN_RB;
    while ((M + rb - 1) / rb > BN_MAX_CHUNKS) rb *= 2;
    return rb;
}
static inline int64_t bn_chunks(int64_t M) { return (M + bn_rows(M) - 1) / bn_rows(M); }
static inline dim3 bn_grid(int64_t M, int64_t C) { return dim3((unsigned)((C + BN_CT - 1) / BN_CT), (unsigned)bn_chunks(M)); }

/* Partial sums of one chunk: sq 0: sum x; sq 1: sum (x - mean)^2. part [chunks, C]. */
__global__ void k_bnh_stat_part(int64_t M, int64_t C, int64_t rb, int dt, const void *x, const float *mean, int sq, float *part) {
    __shared__ float sh[BN_TY][BN_CT];
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    float s[2] = {0.0f, 0.0f};
    for (int j = 0; j < 2; j++) {
        if (c + j >= C) continue;
        const float m = sq ? mean[c + j] : 0.0f;
        for (int64_t r = r0 + threadIdx.y; r < r1; r += BN_TY) {
            const float d = cu_load_f32(dt, x, r * C + c + j) - m;
            s[j] += sq ? d * d : d;
        }
    }
    sh[threadIdx.y][2 * threadIdx.x] = s[0];
    sh[threadIdx.y][2 * threadIdx.x + 1] = s[1];
    __syncthreads();
    if (threadIdx.y == 0)
        for (int j = 0; j < 2; j++) {
            if (c + j >= C) continue;
            float t = 0.0f;
            for (int k = 0; k < BN_TY; k++) t += sh[k][2 * threadIdx.x + j];
            part[blockIdx.y * C + c + j] = t;
        }
}

/* Sum of the chunks' partials of channel c (block (32, BN_TY), one channel per x), in double, every
 * thread row taking every BN_TY-th chunk, then the rows in order: a fixed order. */
__device__ inline double bn_chunk_sum(int64_t chunks, int64_t C, const float *part, int64_t c, double (*sh)[32]) {
    double s = 0;
    if (c < C)
        for (int64_t k = threadIdx.y; k < chunks; k += BN_TY) s += part[k * C + c];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    double t = 0;
    for (int k = 0; k < BN_TY; k++) t += sh[k][threadIdx.x];
    return t;
}

/* phase 0: mean = sum / M; phase 1: rstd from the centred sum, the running statistics (unbiased var) */
__global__ void k_bnh_stat_reduce(int64_t M, int64_t C, int64_t chunks, const float *part, int phase, float eps,
                                 float momentum, float *running_mean, float *running_var, float *mean, float *rstd) {
    __shared__ double sh[BN_TY][32];
    const int64_t c = blockIdx.x * 32LL + threadIdx.x;
    const double s = bn_chunk_sum(chunks, C, part, c, sh);
    if (threadIdx.y != 0 || c >= C) return;
    if (phase == 0) {
        mean[c] = (float)(s / (double)M);
        return;
    }
    const double var = s / (double)M;
    rstd[c] = (float)(1.0 / sqrt(var + eps));
    if (running_mean) running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * (double)mean[c]);
    if (running_var)
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * (M > 1 ? s / (double)(M - 1) : var));
}

__global__ void k_bnh_eval_stats(int64_t C, const float *running_mean, const float *running_var, float eps, float *mean,
                                float *rstd) {
    const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    mean[c] = running_mean[c];
    rstd[c] = (float)(1.0 / sqrt((double)running_var[c] + eps));
}

/* y = x * scale + shift (+ z), then the ReLU; fp32, one rounding at the store */
__global__ void k_bnh_apply(int64_t M, int64_t C, int64_t rb, int dt, const void *x, const float *w, const float *b,
                           const float *mean, const float *rstd, const void *z, int relu, void *y) {
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    for (int j = 0; j < 2; j++) {
        if (c + j >= C) continue;
        const float scale = rstd[c + j] * w[c + j], shift = b[c + j] - mean[c + j] * scale;
        for (int64_t r = r0 + threadIdx.y; r < r1; r += BN_TY) {
            const int64_t i = r * C + c + j;
            float t = cu_load_f32(dt, x, i) * scale + shift;
            if (z) t += cu_load_f32(dt, z, i);
            if (relu) t = t > 0.0f ? t : 0.0f;
            cu_store_f32(dt, y, i, t);
        }
    }
}

/* Where the forward's partials go: y holds M C elements of 2 or 4 bytes, so chunks C floats fit when
 * there are 2 chunks or more (chunks <= ceil(M / 64) <= M / 2); a single chunk (M = 1 included) uses
 * rstd, which is written only after its last read. */
static float *bn_part(int64_t M, void *y, float *rstd) {
    return bn_chunks(M) == 1 ? rstd : (float *)y;
}

void cu_batchnorm_nhwc(int64_t M, int64_t C, int dt, const void *x, const float *w, const float *b,
                       float *running_mean, float *running_var, int training, float momentum, float eps,
                       const void *z, int relu, void *y, float *mean, float *rstd) {
    if (M <= 0 || C <= 0) return;
    cudaStream_t st = cuda_stream();
    const dim3 tile(BN_TX, BN_TY), grid = bn_grid(M, C), rgrid((unsigned)((C + 31) / 32));
    if (training) {
        float *part = bn_part(M, y, rstd);
        const int64_t chunks = bn_chunks(M), rb = bn_rows(M);
        k_bnh_stat_part<<<grid, tile, 0, st>>>(M, C, rb, dt, x, NULL, 0, part);
        k_bnh_stat_reduce<<<rgrid, dim3(32, BN_TY), 0, st>>>(M, C, chunks, part, 0, eps, momentum, NULL, NULL, mean, rstd);
        k_bnh_stat_part<<<grid, tile, 0, st>>>(M, C, rb, dt, x, mean, 1, part);
        k_bnh_stat_reduce<<<rgrid, dim3(32, BN_TY), 0, st>>>(M, C, chunks, part, 1, eps, momentum, running_mean,
                                                            running_var, mean, rstd);
    } else {
        k_bnh_eval_stats<<<(unsigned)((C + 255) / 256), 256, 0, st>>>(C, running_mean, running_var, eps, mean, rstd);
    }
    k_bnh_apply<<<grid, tile, 0, st>>>(M, C, bn_rows(M), dt, x, w, b, mean, rstd, z, relu, y);
    CUDA_LAUNCHED("batchnorm_nhwc");
}

/* Backward scratch: the two partial sums per chunk and channel, then k, m1, m2 per channel. */
size_t cu_batchnorm_nhwc_backward_workspace(int64_t M, int64_t C) { return (size_t)(2 * bn_chunks(M) * C + 3 * C); }

/* 0 + (y > 0 ? gy : 0) with the fused ReLU (the CPU's masking), gy without */
__device__ inline float bn_masked_g(int dt, const void *gy, const void *y, int64_t i) {
    if (!y) return cu_load_f32(dt, gy, i);
    return 0.0f + (cu_load_f32(dt, y, i) > 0.0f ? cu_load_f32(dt, gy, i) : 0.0f);
}

/* gz (+)= g, and the chunk's partial sums of g and g xh: part [2][chunks, C] */
__global__ void k_bnhb_part(int64_t M, int64_t C, int64_t rb, int dt, const void *x, const float *mean, const float *rstd,
                           const void *gy, const void *y, void *gz, int gz_acc, float *part) {
    __shared__ float sh[2][BN_TY][BN_CT];
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    for (int j = 0; j < 2; j++) {
        float sg = 0.0f, sgx = 0.0f;
        if (c + j < C) {
            const float mu = mean[c + j], rs = rstd[c + j];
            for (int64_t r = r0 + threadIdx.y; r < r1; r += BN_TY) {
                const int64_t i = r * C + c + j;
                const float g = bn_masked_g(dt, gy, y, i);
                if (gz) cu_store_f32(dt, gz, i, gz_acc ? cu_load_f32(dt, gz, i) + g : g);
                sg += g;
                sgx += g * ((cu_load_f32(dt, x, i) - mu) * rs);
            }
        }
        sh[0][threadIdx.y][2 * threadIdx.x + j] = sg;
        sh[1][threadIdx.y][2 * threadIdx.x + j] = sgx;
    }
    __syncthreads();
    if (threadIdx.y == 0)
        for (int j = 0; j < 2; j++) {
            if (c + j >= C) continue;
            float a = 0.0f, t = 0.0f;
            for (int k = 0; k < BN_TY; k++) {
                a += sh[0][k][2 * threadIdx.x + j];
                t += sh[1][k][2 * threadIdx.x + j];
            }
            part[blockIdx.y * C + c + j] = a;
            part[(gridDim.y + blockIdx.y) * C + c + j] = t;
        }
}

/* gb += sum g, gw += sum g xh; coef [3, C] = k = w rstd, m1 = sum g / M, m2 = sum g xh / M (training) */
__global__ void k_bnhb_reduce(int64_t M, int64_t C, int64_t chunks, const float *part, const float *w,
                             const float *rstd, int training, float *gw, float *gb, float *coef) {
    __shared__ double sh[BN_TY][32];
    const int64_t c = blockIdx.x * 32LL + threadIdx.x;
    const double sg = bn_chunk_sum(chunks, C, part, c, sh);
    __syncthreads(); /* sh is reused */
    const double sgx = bn_chunk_sum(chunks, C, part + chunks * C, c, sh);
    if (threadIdx.y != 0 || c >= C) return;
    if (gb) gb[c] += (float)sg;
    if (gw) gw[c] += (float)sgx;
    coef[c] = w[c] * rstd[c];
    coef[C + c] = training ? (float)(sg / (double)M) : 0.0f;
    coef[2 * C + c] = training ? (float)(sgx / (double)M) : 0.0f;
}

/* gx (+)= k (g - m1 - xh m2) */
__global__ void k_bnhb_dx(int64_t M, int64_t C, int64_t rb, int dt, const void *x, const float *mean, const float *rstd,
                         const void *gy, const void *y, const float *coef, void *gx, int gx_acc) {
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    for (int j = 0; j < 2; j++) {
        if (c + j >= C) continue;
        const float mu = mean[c + j], rs = rstd[c + j];
        const float k = coef[c + j], m1 = coef[C + c + j], m2 = coef[2 * C + c + j];
        for (int64_t r = r0 + threadIdx.y; r < r1; r += BN_TY) {
            const int64_t i = r * C + c + j;
            const float t = k * (bn_masked_g(dt, gy, y, i) - m1 - (cu_load_f32(dt, x, i) - mu) * rs * m2);
            cu_store_f32(dt, gx, i, gx_acc ? cu_load_f32(dt, gx, i) + t : 0.0f + t);
        }
    }
}

void cu_batchnorm_nhwc_backward(int64_t M, int64_t C, int dt, const void *x, const float *w,
                                const float *mean, const float *rstd, const void *gy, const void *y,
                                int training, float eps, void *gx, int gx_acc, float *gw, float *gb,
                                void *gz, int gz_acc, float *work) {
    if (M <= 0 || C <= 0 || !(gx || gw || gb || gz)) return;
    cudaStream_t st = cuda_stream();
    const dim3 tile(BN_TX, BN_TY), grid = bn_grid(M, C);
    const int64_t chunks = bn_chunks(M), rb = bn_rows(M);
    float *coef = work + 2 * chunks * C;
    k_bnhb_part<<<grid, tile, 0, st>>>(M, C, rb, dt, x, mean, rstd, gy, y, gz, gz_acc, work);
    if (gx || gw || gb)
        k_bnhb_reduce<<<dim3((unsigned)((C + 31) / 32)), dim3(32, BN_TY), 0, st>>>(M, C, chunks, work, w, rstd, training,
                                                                                gw, gb, coef);
    if (gx) k_bnhb_dx<<<grid, tile, 0, st>>>(M, C, rb, dt, x, mean, rstd, gy, y, coef, gx, gx_acc);
    CUDA_LAUNCHED("batchnorm_nhwc_backward");
}
