/* cuda_common.h — shared pieces of the CUDA kernels (internal to kernels/cuda, C++ side only):
 * the process-wide stream and library handles, the sticky error record, launch helpers and the
 * strided-index walker that mirrors kernels/cpu's coalesced loops.
 *
 * Error model: table functions return void (kernels/backend.h), so a failed CUDA call records one
 * message (first failure wins) that the table's last_error returns; callers check it once per
 * step. Kernels never allocate (the table's contract). */
#ifndef ENDORET_CUDA_COMMON_H
#define ENDORET_CUDA_COMMON_H

#include <cuda_runtime.h>
#include <stdint.h>

/* backend.h has its own extern "C" guard: backend_cuda() and the table keep C linkage. */
#include "kernels/backend.h"

struct cublasContext;
struct cudnnContext;

/* The stream every table function enqueues on (created with the backend). */
cudaStream_t cuda_stream(void);
/* cuBLAS handle bound to cuda_stream(). */
struct cublasContext *cuda_cublas(void);
/* cuDNN handle bound to cuda_stream(), made on first use (only convolutions and batch norm need
 * it); NULL after recording why when cuDNN cannot start. */
struct cudnnContext *cuda_cudnn(void);
/* Scratch for reductions to one number (optim.cu): CUDA_RED_BLOCKS doubles on the device and the
 * same in pinned host memory, allocated once per device by the backend's init (NULL if that
 * failed). The only memory kernels touch that the caller did not pass in. */
#define CUDA_RED_BLOCKS 256
double *cuda_red_partials(void);
double *cuda_red_partials_host(void);
/* Scratch of sumsq_many (optim.cu), allocated with the partials: per chunk of CUDA_MULTI_MAX arrays,
 * their pointers and lengths (device, and pinned host staging), CUDA_MULTI_BLOCKS partial sums per
 * array and one result per array (device, and pinned host). */
#define CUDA_MULTI_MAX 1024
#define CUDA_MULTI_BLOCKS 32
struct cuda_multi_scratch {
    const float **ptrs, **ptrs_host;
    int64_t *ns, *ns_host;
    double *part, *res, *res_host;
};
const cuda_multi_scratch *cuda_multi(void);
/* The host waits for the stream: every such wait goes through here and is counted
 * (cuda_host_waits, the table's host_waits; host_wait.cu). */
cudaError_t cuda_wait(void);
unsigned long long cuda_host_waits(void);
/* The table's upload: small copies staged through a page-locked ring (no wait), larger ones wait. */
void cuda_upload_staged(void *dst, const void *src, size_t bytes);
void cuda_upload_ring_close(void);
/* Record the first failure (file:line: what: cuda message). Returns 1 if `e` is an error. */
int cuda_record(cudaError_t e, const char *what, const char *file, int line);
void cuda_record_msg(const char *msg, const char *file, int line);

/* A kernel's dynamically sized shared memory (the launch's third argument; above 48 KiB only after
 * cudaFuncSetAttribute(MaxDynamicSharedMemorySize)). The host emulation defines its own. */
#ifndef ER_DYNAMIC_SMEM
#define ER_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

/* fp32 <-> bf16 on the device, the bits of kernels/dtype.h's er_bf16_to_f32 / er_f32_to_bf16 (round
 * to nearest even on the bit pattern, NaN kept quiet, subnormals kept; not __float2bfloat16_rn). */
__device__ inline float cu_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ inline uint16_t cu_f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The exact-erf GELU and its derivative (cpu gelu_f / gelu_d): unary's and bias_gelu's */
__device__ inline float cu_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ inline float cu_gelu_grad(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752440f)) + x * 0.39894228040143267794f * expf(-0.5f * x * x);
}

#define CUDA_CHECK(call) cuda_record((call), #call, __FILE__, __LINE__)
/* After a kernel launch: catches bad launch configurations (not asynchronous faults). */
#define CUDA_LAUNCHED(name) cuda_record(cudaGetLastError(), name, __FILE__, __LINE__)

/* A grid of 256-thread blocks covering n elements with a grid-stride loop (capped). */
static inline unsigned cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535LL * 8) b = 65535LL * 8;
    return (unsigned)b;
}

/* A strided view passed by value to kernels: shape plus up to 3 stride sets, after coalescing. */
struct cu_index {
    int ndim;
    int64_t shape[ER_MAX_DIMS];
    int64_t st[3][ER_MAX_DIMS];
};

/* Build a cu_index from `nstr` stride arrays, dropping size-1 dims and merging dims that are
 * contiguous in every stride set (the same coalescing as cpu_coalesce). */
static inline cu_index cu_index_make(int ndim, const int64_t *shape, const int64_t *const *strides,
                                     int nstr) {
    cu_index ix;
    int nd = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1) continue;
        ix.shape[nd] = shape[i];
        for (int s = 0; s < nstr; s++) ix.st[s][nd] = strides[s][i];
        nd++;
    }
    if (nd == 0) {
        ix.shape[0] = 1;
        for (int s = 0; s < nstr; s++) ix.st[s][0] = 1;
        nd = 1;
    }
    int out = 0;
    for (int i = 1; i < nd; i++) {
        int merge = 1;
        for (int s = 0; s < nstr; s++)
            if (ix.st[s][out] != ix.st[s][i] * ix.shape[i]) merge = 0;
        if (merge) {
            ix.shape[out] *= ix.shape[i];
            for (int s = 0; s < nstr; s++) ix.st[s][out] = ix.st[s][i];
        } else {
            out++;
            ix.shape[out] = ix.shape[i];
            for (int s = 0; s < nstr; s++) ix.st[s][out] = ix.st[s][i];
        }
    }
    ix.ndim = out + 1;
    return ix;
}

/* (b, h, t) strides of an attention operand, zero for a NULL (frozen / absent) one */
static inline void cu_copy3(int64_t *dst, const int64_t *src) {
    for (int i = 0; i < 3; i++) dst[i] = src ? src[i] : 0;
}

static inline int64_t cu_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

#ifdef __CUDACC__
/* Offsets of the linear (row-major) element e in each of the first NS stride sets. */
template <int NS>
__device__ __forceinline__ void cu_offsets(const cu_index &ix, int64_t e, int64_t *off) {
    for (int s = 0; s < NS; s++) off[s] = 0;
    for (int d = ix.ndim - 1; d >= 0; d--) {
        int64_t c = e % ix.shape[d];
        e /= ix.shape[d];
        for (int s = 0; s < NS; s++) off[s] += c * ix.st[s][d];
    }
}

__device__ __forceinline__ float cu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double cu_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float cu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Block-wide sum in double (blockDim.x a multiple of 32, <= 1024); every thread gets the result. */
__device__ __forceinline__ double cu_block_sum_d(double v) {
    __shared__ double part[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cu_warp_sum_d(v);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0) part[w] = v;
    __syncthreads();
    double t = lane < nw ? part[lane] : 0.0;
    return cu_warp_sum_d(t);
}
__device__ __forceinline__ float cu_block_max(float v) {
    __shared__ float partm[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cu_warp_max(v);
    __syncthreads();
    if (lane == 0) partm[w] = v;
    __syncthreads();
    float t = lane < nw ? partm[lane] : -INFINITY;
    return cu_warp_max(t);
}

/* Element i of a buffer of either storage type (cu_bf16_to_f32 / cu_f32_to_bf16 above):
 * cu_load_f32 widens, cu_store_f32 rounds once, cu_add_f32 adds v to it (a bf16 element:
 * round(widen + v), the CPU kernels' rule). */
__device__ inline float cu_load_f32(int dtype, const void *x, int64_t i) {
    return dtype == ER_BF16 ? cu_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

__device__ inline void cu_store_f32(int dtype, void *y, int64_t i, float v) {
    if (dtype == ER_BF16) ((uint16_t *)y)[i] = cu_f32_to_bf16(v);
    else ((float *)y)[i] = v;
}

__device__ inline void cu_add_f32(int dtype, void *y, int64_t i, float v) {
    cu_store_f32(dtype, y, i, cu_load_f32(dtype, y, i) + v);
}

/* Elements i and i + 1 as one 4-byte (bf16) or 8-byte (fp32) access when `vec` (i even and the buffer
 * aligned to two elements: cu_pair_aligned), else two; the same values either way. */
__device__ inline void cu_load2_f32(int dtype, const void *x, int64_t i, bool vec, float v[2]) {
    if (vec && dtype == ER_BF16) {
        const uint32_t u = ((const uint32_t *)x)[i >> 1];
        v[0] = cu_bf16_to_f32((uint16_t)(u & 0xFFFFu)), v[1] = cu_bf16_to_f32((uint16_t)(u >> 16));
    } else if (vec) {
        const float2 f = ((const float2 *)x)[i >> 1];
        v[0] = f.x, v[1] = f.y;
    } else {
        v[0] = cu_load_f32(dtype, x, i), v[1] = cu_load_f32(dtype, x, i + 1);
    }
}

__device__ inline void cu_store2_f32(int dtype, void *y, int64_t i, bool vec, const float v[2]) {
    if (vec && dtype == ER_BF16)
        ((uint32_t *)y)[i >> 1] = (uint32_t)cu_f32_to_bf16(v[0]) | (uint32_t)cu_f32_to_bf16(v[1]) << 16;
    else if (vec) ((float2 *)y)[i >> 1] = make_float2(v[0], v[1]);
    else cu_store_f32(dtype, y, i, v[0]), cu_store_f32(dtype, y, i + 1, v[1]);
}

/* Whether p (NULL: yes) holds pairs of elements of dtype at even indices on a two-element boundary. */
static inline bool cu_pair_aligned(int dtype, const void *p) {
    return !p || (uintptr_t)p % (2 * (dtype == ER_BF16 ? 2 : 4)) == 0;
}
#endif

#endif
