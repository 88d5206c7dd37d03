/* bnorm_nhwc.cu — batch norm of channels-last activations (rows [M, C], fp32 or bf16 storage) with the
 * ResNet block's residual add and ReLU fused, forward and backward; mirrors kernels/cpu/bnorm_nhwc.c.
 *
 * Layout of every pass: a block of BN_TX x BN_TY threads covers BN_CT = 2 BN_TX adjacent channels
 * (a pair per thread, read and written as one 4-byte bf16 or 8-byte fp32 access when C is even and
 * the buffers aligned, so a warp moves 64 consecutive elements of a row at once) and a chunk of BN_RB
 * rows (thread row y takes rows y, y + BN_TY, ...). The grid is (channel tiles, row chunks), so even
 * C = 64 with many rows fills the GPU.
 *
 * Reductions are deterministic, without atomics: each block writes per-channel fp32 partials of its
 * chunk (fixed order: rows in turn, then the BN_TY slices in turn) and a second small kernel merges
 * the chunks' partials per channel in double, in a fixed order. The forward's statistics read x from
 * memory once: each chunk takes its own mean and the squared deviations from it (the chunk is still
 * in cache), and the merge is Chan et al.'s (mean, M2) combination, as stable as two passes over x
 * (the CPU's) without the second pass. The backward reads gy, y and x twice: the sums of g and g xh,
 * then the input gradient.
 *
 * Scratch of the forward: batchnorm_nhwc has no workspace argument, so the partials (2 chunks x C
 * floats) live in y before y is written: y must not overlap x or z. With one chunk they live in mean
 * and rstd. */
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

/* The block's sum over its BN_TY thread rows of v (one value a thread per channel j), in row order,
 * returned to every thread of the column; sh [BN_TY][BN_CT] is reused after a barrier. */
__device__ inline float bn_col_sum(float (*sh)[BN_CT], int j, float v) {
    sh[threadIdx.y][2 * threadIdx.x + j] = v;
    __syncthreads();
    float t = 0.0f;
    for (int k = 0; k < BN_TY; k++) t += sh[k][2 * threadIdx.x + j];
    __syncthreads();
    return t;
}

/* One chunk's statistics per channel, read from memory once: its mean, then the sum of squared
 * deviations from that mean over the same rows (a second read of a 64-row slice the block has just
 * read: L1/L2, not DRAM) into pm, pq [chunks, C]. */
__global__ void k_bnh_stat_part(int64_t M, int64_t C, int64_t rb, int dt, const void *x, bool vec, float *pm, float *pq) {
    __shared__ float sh[BN_TY][BN_CT];
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    const int nj = c + 1 < C ? 2 : c < C ? 1 : 0;
    float s[2] = {0.0f, 0.0f}, q[2] = {0.0f, 0.0f}, v[2] = {0.0f, 0.0f}, mu[2];
    for (int64_t r = r0 + threadIdx.y; r < r1 && nj; r += BN_TY) {
        if (nj == 2) cu_load2_f32(dt, x, r * C + c, vec, v);
        else v[0] = cu_load_f32(dt, x, r * C + c);
        #pragma unroll
        for (int j = 0; j < 2; j++) if (j < nj) s[j] += v[j];
    }
    #pragma unroll
    for (int j = 0; j < 2; j++) mu[j] = bn_col_sum(sh, j, s[j]) / (float)(r1 - r0);
    for (int64_t r = r0 + threadIdx.y; r < r1 && nj; r += BN_TY) {
        if (nj == 2) cu_load2_f32(dt, x, r * C + c, vec, v);
        else v[0] = cu_load_f32(dt, x, r * C + c);
        #pragma unroll
        for (int j = 0; j < 2; j++) if (j < nj) q[j] += (v[j] - mu[j]) * (v[j] - mu[j]);
    }
    #pragma unroll
    for (int j = 0; j < 2; j++) {
        const float m2 = bn_col_sum(sh, j, q[j]);
        if (threadIdx.y == 0 && j < nj) {
            pm[blockIdx.y * C + c + j] = mu[j];
            pq[blockIdx.y * C + c + j] = m2;
        }
    }
}

/* Sum of f(k) over the chunks k of channel c (block (32, BN_TY), one channel per x), in double, every
 * thread row taking every BN_TY-th chunk, then the rows in order: a fixed order. */
template <class F>
__device__ inline double bn_chunk_sum(int64_t chunks, int64_t C, int64_t c, double (*sh)[32], F f) {
    double s = 0;
    if (c < C)
        for (int64_t k = threadIdx.y; k < chunks; k += BN_TY) s += f(k);
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    double t = 0;
    for (int k = 0; k < BN_TY; k++) t += sh[k][threadIdx.x];
    __syncthreads();
    return t;
}

/* The chunks' (count, mean, sum of squares) merged per channel (Chan et al.'s parallel variance):
 * mean = sum n_k mean_k / M, M2 = sum (M2_k + n_k (mean_k - mean)^2), in double; then rstd and the
 * running statistics (unbiased variance). pm, pq are mean, rstd themselves with one chunk: every read of
 * a channel's partials precedes the writes of that channel. */
__global__ void k_bnh_stat_reduce(int64_t M, int64_t C, int64_t rb, int64_t chunks, const float *pm, const float *pq,
                                 float eps, float momentum, float *running_mean, float *running_var, float *mean,
                                 float *rstd) {
    __shared__ double sh[BN_TY][32];
    const int64_t c = blockIdx.x * 32LL + threadIdx.x;
    auto n_of = [&](int64_t k) { return (double)((k + 1) * rb < M ? rb : M - k * rb); };
    const double mu = bn_chunk_sum(chunks, C, c, sh, [&](int64_t k) { return n_of(k) * pm[k * C + c]; }) / (double)M;
    const double m2 = bn_chunk_sum(chunks, C, c, sh, [&](int64_t k) {
        const double d = pm[k * C + c] - mu;
        return pq[k * C + c] + n_of(k) * d * d;
    });
    if (threadIdx.y != 0 || c >= C) return;
    const double var = m2 / (double)M;
    mean[c] = (float)mu;
    rstd[c] = (float)(1.0 / sqrt(var + eps));
    if (running_mean) running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * (double)(float)mu);
    if (running_var)
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * (M > 1 ? m2 / (double)(M - 1) : var));
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
                           const float *mean, const float *rstd, const void *z, int relu, void *y, bool vec) {
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    const int nj = c + 1 < C ? 2 : c < C ? 1 : 0;
    float scale[2] = {0.0f, 0.0f}, shift[2] = {0.0f, 0.0f}, v[2] = {0.0f, 0.0f}, u[2] = {0.0f, 0.0f};
    for (int j = 0; j < nj; j++)
        scale[j] = rstd[c + j] * w[c + j], shift[j] = b[c + j] - mean[c + j] * scale[j];
    for (int64_t r = r0 + threadIdx.y; r < r1 && nj; r += BN_TY) {
        const int64_t i = r * C + c;
        if (nj == 2) {
            cu_load2_f32(dt, x, i, vec, v);
            if (z) cu_load2_f32(dt, z, i, vec, u);
        } else {
            v[0] = cu_load_f32(dt, x, i);
            if (z) u[0] = cu_load_f32(dt, z, i);
        }
        #pragma unroll
        for (int j = 0; j < 2; j++) if (j < nj) {
            float t = v[j] * scale[j] + shift[j];
            if (z) t += u[j];
            v[j] = relu ? (t > 0.0f ? t : 0.0f) : t;
        }
        if (nj == 2) cu_store2_f32(dt, y, i, vec, v);
        else cu_store_f32(dt, y, i, v[0]);
    }
}

/* Where the forward's partials go (2 chunks C floats): y holds M C elements of 2 or 4 bytes, at least
 * M C / 2 floats, and 2 chunks <= 2 ceil(M / 64) <= M / 2 when there are 2 chunks or more; a single
 * chunk (M <= 64, M = 1 included) writes its mean and sum of squares to mean and rstd. */
void cu_batchnorm_nhwc(int64_t M, int64_t C, int dt, const void *x, const float *w, const float *b,
                       float *running_mean, float *running_var, int training, float momentum, float eps,
                       const void *z, int relu, void *y, float *mean, float *rstd) {
    if (M <= 0 || C <= 0) return;
    cudaStream_t st = cuda_stream();
    const dim3 tile(BN_TX, BN_TY), grid = bn_grid(M, C), rgrid((unsigned)((C + 31) / 32));
    const bool vec = C % 2 == 0 && cu_pair_aligned(dt, x) && cu_pair_aligned(dt, z) && cu_pair_aligned(dt, y);
    if (training) {
        const int64_t chunks = bn_chunks(M), rb = bn_rows(M);
        float *pm = chunks == 1 ? mean : (float *)y, *pq = chunks == 1 ? rstd : pm + chunks * C;
        k_bnh_stat_part<<<grid, tile, 0, st>>>(M, C, rb, dt, x, vec, pm, pq);
        k_bnh_stat_reduce<<<rgrid, dim3(32, BN_TY), 0, st>>>(M, C, rb, chunks, pm, pq, eps, momentum, running_mean,
                                                            running_var, mean, rstd);
    } else {
        k_bnh_eval_stats<<<(unsigned)((C + 255) / 256), 256, 0, st>>>(C, running_mean, running_var, eps, mean, rstd);
    }
    k_bnh_apply<<<grid, tile, 0, st>>>(M, C, bn_rows(M), dt, x, w, b, mean, rstd, z, relu, y, vec);
    CUDA_LAUNCHED("batchnorm_nhwc");
}

/* Backward scratch: the two partial sums per chunk and channel, then k, m1, m2 per channel. */
size_t cu_batchnorm_nhwc_backward_workspace(int64_t M, int64_t C) { return (size_t)(2 * bn_chunks(M) * C + 3 * C); }

/* Elements i (and i + 1 when nj is 2) of a buffer, paired as cu_load2_f32 */
__device__ inline void bn_ld(int dt, const void *p, int64_t i, int nj, bool vec, float v[2]) {
    if (nj == 2) cu_load2_f32(dt, p, i, vec, v);
    else v[0] = cu_load_f32(dt, p, i);
}
__device__ inline void bn_st(int dt, void *p, int64_t i, int nj, bool vec, const float v[2]) {
    if (nj == 2) cu_store2_f32(dt, p, i, vec, v);
    else cu_store_f32(dt, p, i, v[0]);
}

/* g = 0 + (y > 0 ? gy : 0) with the fused ReLU (the CPU's masking), gy without */
__device__ inline void bn_masked_g(int dt, const void *gy, const void *y, int64_t i, int nj, bool vec, float g[2]) {
    float m[2];
    bn_ld(dt, gy, i, nj, vec, g);
    if (!y) return;
    bn_ld(dt, y, i, nj, vec, m);
    #pragma unroll
    for (int j = 0; j < 2; j++) if (j < nj) g[j] = 0.0f + (m[j] > 0.0f ? g[j] : 0.0f);
}

/* gz (+)= g, and the chunk's partial sums of g and g xh: part [2][chunks, C] */
__global__ void k_bnhb_part(int64_t M, int64_t C, int64_t rb, int dt, const void *x, const float *mean, const float *rstd,
                           const void *gy, const void *y, void *gz, int gz_acc, float *part, bool vec) {
    __shared__ float sh[BN_TY][BN_CT];
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    const int nj = c + 1 < C ? 2 : c < C ? 1 : 0;
    float sg[2] = {0.0f, 0.0f}, sgx[2] = {0.0f, 0.0f}, mu[2] = {0.0f, 0.0f}, rs[2] = {0.0f, 0.0f}, g[2] = {0.0f, 0.0f}, v[2] = {0.0f, 0.0f};
    #pragma unroll
    for (int j = 0; j < 2; j++) if (j < nj) mu[j] = mean[c + j], rs[j] = rstd[c + j];
    for (int64_t r = r0 + threadIdx.y; r < r1 && nj; r += BN_TY) {
        const int64_t i = r * C + c;
        bn_masked_g(dt, gy, y, i, nj, vec, g);
        if (gz) {
            if (gz_acc) {
                bn_ld(dt, gz, i, nj, vec, v);
                #pragma unroll
                for (int j = 0; j < 2; j++) if (j < nj) v[j] += g[j];
                bn_st(dt, gz, i, nj, vec, v);
            } else {
                bn_st(dt, gz, i, nj, vec, g);
            }
        }
        bn_ld(dt, x, i, nj, vec, v);
        #pragma unroll
        for (int j = 0; j < 2; j++) if (j < nj) sg[j] += g[j], sgx[j] += g[j] * ((v[j] - mu[j]) * rs[j]);
    }
    #pragma unroll
    for (int j = 0; j < 2; j++) {
        const float a = bn_col_sum(sh, j, sg[j]), t = bn_col_sum(sh, j, sgx[j]);
        if (threadIdx.y == 0 && j < nj) {
            part[blockIdx.y * C + c + j] = a;
            part[(gridDim.y + blockIdx.y) * C + c + j] = t;
        }
    }
}

/* gb += sum g, gw += sum g xh; coef [3, C] = k = w rstd, m1 = sum g / M, m2 = sum g xh / M (training) */
__global__ void k_bnhb_reduce(int64_t M, int64_t C, int64_t chunks, const float *part, const float *w,
                             const float *rstd, int training, float *gw, float *gb, float *coef) {
    __shared__ double sh[BN_TY][32];
    const int64_t c = blockIdx.x * 32LL + threadIdx.x;
    const float *p0 = part, *p1 = part + chunks * C;
    const double sg = bn_chunk_sum(chunks, C, c, sh, [&](int64_t k) { return (double)p0[k * C + c]; });
    const double sgx = bn_chunk_sum(chunks, C, c, sh, [&](int64_t k) { return (double)p1[k * C + c]; });
    if (threadIdx.y != 0 || c >= C) return;
    if (gb) gb[c] += (float)sg;
    if (gw) gw[c] += (float)sgx;
    coef[c] = w[c] * rstd[c];
    coef[C + c] = training ? (float)(sg / (double)M) : 0.0f;
    coef[2 * C + c] = training ? (float)(sgx / (double)M) : 0.0f;
}

/* gx (+)= k (g - m1 - xh m2) */
__global__ void k_bnhb_dx(int64_t M, int64_t C, int64_t rb, int dt, const void *x, const float *mean, const float *rstd,
                         const void *gy, const void *y, const float *coef, void *gx, int gx_acc, bool vec) {
    const int64_t c = blockIdx.x * (int64_t)BN_CT + 2 * threadIdx.x;
    const int64_t r0 = blockIdx.y * rb, r1 = r0 + rb < M ? r0 + rb : M;
    const int nj = c + 1 < C ? 2 : c < C ? 1 : 0;
    float mu[2] = {0, 0}, rs[2] = {0, 0}, k[2] = {0, 0}, m1[2] = {0, 0}, m2[2] = {0, 0}, g[2] = {0, 0}, v[2] = {0, 0},
          o[2] = {0, 0};
    for (int j = 0; j < nj; j++)
        mu[j] = mean[c + j], rs[j] = rstd[c + j], k[j] = coef[c + j], m1[j] = coef[C + c + j], m2[j] = coef[2 * C + c + j];
    for (int64_t r = r0 + threadIdx.y; r < r1 && nj; r += BN_TY) {
        const int64_t i = r * C + c;
        bn_masked_g(dt, gy, y, i, nj, vec, g);
        bn_ld(dt, x, i, nj, vec, v);
        if (gx_acc) bn_ld(dt, gx, i, nj, vec, o);
        #pragma unroll
        for (int j = 0; j < 2; j++) if (j < nj) {
            const float t = k[j] * (g[j] - m1[j] - (v[j] - mu[j]) * rs[j] * m2[j]);
            o[j] = gx_acc ? o[j] + t : 0.0f + t;
        }
        bn_st(dt, gx, i, nj, vec, o);
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
    const bool vec = C % 2 == 0 && cu_pair_aligned(dt, x) && cu_pair_aligned(dt, gy) && cu_pair_aligned(dt, y) &&
                     cu_pair_aligned(dt, gx) && cu_pair_aligned(dt, gz);
    k_bnhb_part<<<grid, tile, 0, st>>>(M, C, rb, dt, x, mean, rstd, gy, y, gz, gz_acc, work, vec);
    if (gx || gw || gb)
        k_bnhb_reduce<<<dim3((unsigned)((C + 31) / 32)), dim3(32, BN_TY), 0, st>>>(M, C, chunks, work, w, rstd, training,
                                                                                gw, gb, coef);
    if (gx) k_bnhb_dx<<<grid, tile, 0, st>>>(M, C, rb, dt, x, mean, rstd, gy, y, coef, gx, gx_acc, vec);
    CUDA_LAUNCHED("batchnorm_nhwc_backward");
}
