/* emu_cuda.h — a host emulation of the small part of CUDA, cuBLAS and cuDNN that kernels/cuda uses,
 * so the CUDA kernels' own code (indexing, tiling, barriers, warp shuffles, online softmax) can be
 * executed and compared with the CPU table on a machine without a GPU (tests/cuda/emulate.py).
 *
 * Model: a launch runs its blocks one after another; the threads of a block are real std::threads
 * (kernels without block/warp synchronisation run them one after another on one thread instead)
 * (so __syncthreads is a real barrier), grouped into warps of 32 consecutive linear thread ids
 * whose shuffles exchange values through a per-warp slot array between two warp barriers.
 * __shared__ becomes `static`, which is per-block memory because only one block runs at a time.
 * cublasGemmStridedBatchedEx is a column-major reference loop (bf16 mode rounds its inputs to
 * bf16), which checks the row-major -> column-major operand mapping of gemm.cu; the cuDNN calls of
 * conv.cu are reference loops too (emu_cudnn.h).
 * What this cannot check: real-GPU concerns (memory-model races between blocks, performance,
 * the real cuBLAS). Never part of the product build. */
#ifndef ENDORET_EMU_CUDA_H
#define ENDORET_EMU_CUDA_H
/* kernels/cuda code that needs a host stand-in for a PTX instruction tests this (attention_flash.cu's
 * mma.sync and ldmatrix: emu_wmma.h) */
#define ENDORET_CUDA_EMULATED 1

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <barrier>
#include <cmath>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

using std::isfinite;

#define __CUDACC__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint4 {
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }
struct alignas(8) float2 {
    float x, y;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct alignas(16) float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
/* bit casts (kernels/cuda/cast.cu rounds fp32 -> bf16 on the bit pattern) */
static inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

/* ---- per-block execution state ---- */
struct emu_block {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<std::barrier<>>> warp_bar;
    std::vector<uint64_t> slots; /* one per thread: shuffle exchange */
};
inline emu_block *g_emu_block = nullptr;
inline thread_local int t_linear = 0;

static inline void __syncthreads() { g_emu_block->bar->arrive_and_wait(); }

template <class T> static inline T emu_shfl(T v, int src_lane) {
    int warp = t_linear >> 5, base = warp * 32;
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    g_emu_block->slots[t_linear] = bits;
    g_emu_block->warp_bar[warp]->arrive_and_wait();
    uint64_t got = g_emu_block->slots[base + (src_lane & 31)];
    g_emu_block->warp_bar[warp]->arrive_and_wait();
    T r;
    memcpy(&r, &got, sizeof r);
    return r;
}
template <class T> static inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int m) { return emu_shfl(v, (t_linear & 31) ^ m); }

inline std::mutex g_emu_atomic;
static inline float atomicAdd(float *p, float v) {
    std::lock_guard<std::mutex> lk(g_emu_atomic);
    float old = *p;
    *p = old + v;
    return old;
}

/* kernel<<<grid, block, smem, stream>>>(args) is rewritten to emu_launch(grid, block, [&]{ kernel(args); }).
 * One std::thread per CUDA thread of a block, created once per launch: the threads run block after
 * block, separated by a launch-wide gate whose completion step builds the next block's barriers. */
static inline void emu_launch(dim3 grid, dim3 block, const std::function<void()> &fn) {
    unsigned nt = block.x * block.y * block.z, nblocks = grid.x * grid.y * grid.z;
    gridDim = grid;
    blockDim = block;
    if (nblocks == 0 || nt == 0) return;
    emu_block b;
    auto setup = [&b, nt]() {
        b.bar.reset(new std::barrier<>(nt));
        b.warp_bar.clear();
        for (unsigned w = 0; w < (nt + 31) / 32; w++) {
            unsigned n = nt - w * 32 < 32 ? nt - w * 32 : 32;
            b.warp_bar.emplace_back(new std::barrier<>(n));
        }
        b.slots.assign(nt, 0);
    };
    unsigned cur = 0;
    setup();
    auto next = [&]() noexcept {
        cur++;
        if (cur < nblocks) setup();
    };
    std::barrier<decltype(next)> gate(nt, next);
    g_emu_block = &b;
    std::vector<std::thread> th;
    th.reserve(nt);
    for (unsigned t = 0; t < nt; t++)
        th.emplace_back([&, t] {
            for (;;) {
                unsigned blk = cur; /* published by the gate's completion step */
                if (blk >= nblocks) break;
                t_linear = (int)t;
                threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                blockIdx = dim3(blk % grid.x, (blk / grid.x) % grid.y, blk / (grid.x * grid.y));
                fn();
                /* an exited thread no longer takes part in barriers (as on the GPU) */
                b.warp_bar[t / 32]->arrive_and_drop();
                b.bar->arrive_and_drop();
                gate.arrive_and_wait();
            }
        });
    for (auto &x : th) x.join();
    g_emu_block = nullptr;
}

/* Kernels without __syncthreads / warp shuffles (emulate.py decides): the threads of each block run
 * one after another on the calling thread. Without barriers CUDA gives no ordering between threads,
 * so any result this produces is one a GPU may produce too. */
static inline void emu_launch_seq(dim3 grid, dim3 block, const std::function<void()> &fn) {
    unsigned nt = block.x * block.y * block.z;
    gridDim = grid;
    blockDim = block;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++)
                for (unsigned t = 0; t < nt; t++) {
                    t_linear = (int)t;
                    threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
                    blockIdx = dim3(bx, by, bz);
                    fn();
                }
    t_linear = 0;
    threadIdx = blockIdx = dim3(0, 0, 0);
}

/* ---- runtime API ---- */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorNotReady = 600 };
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
#define cudaStreamNonBlocking 1
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};
static inline const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    snprintf(p->name, sizeof p->name, "host emulation (tests/cuda/emu_cuda.h)");
    p->major = 9;
    p->minor = 0;
    p->totalGlobalMem = (size_t)1 << 30;
    return cudaSuccess;
}
static inline cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
static inline cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
/* Dynamic shared memory: one block runs at a time, so one static buffer of the H100's per-block
 * maximum serves every kernel; the opt-in above 48 KiB is accepted as it is. */
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
template <class F> static inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }
#define ER_DYNAMIC_SMEM(name) alignas(128) static unsigned char name[227 * 1024]
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (void *)1; return cudaSuccess; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
/* Events: every launch and copy has finished when it returns, so an event is always complete. */
#define cudaEventDisableTiming 2
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (void *)1; return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
static inline cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaMalloc(void **p, size_t n) {
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
static inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
static inline cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
/* the runtime's typed overloads */
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
template <class T> static inline cudaError_t cudaMallocHost(T **p, size_t n) { return cudaMalloc((void **)p, n); }
static inline cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    memmove(d, s, n);
    return cudaSuccess;
}

/* ---- cuBLAS ---- */
struct cublasContext {
    int unused;
};
typedef cublasContext *cublasHandle_t;
typedef int cublasStatus_t;
enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
typedef enum { CUBLAS_OP_N, CUBLAS_OP_T } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_16BF } cublasComputeType_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_GEMM_DEFAULT } cublasGemmAlgo_t;
typedef enum { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
static inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
    static cublasContext ctx;
    *h = &ctx;
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
static inline const char *cublasGetStatusString(cublasStatus_t s) { return s ? "emulated cuBLAS error" : "success"; }
static inline cublasStatus_t cublasGetProperty(libraryPropertyType t, int *v) {
    *v = t == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}
static inline float emu_bf16(float x) { /* round to nearest even, keep 8 mantissa bits */
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}
/* element i of an operand of type t (CUDA_R_16BF: bf16 bits, widened exactly) */
static inline float emu_load(cudaDataType t, const void *p, long i) {
    if (t == CUDA_R_16BF) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return ((const float *)p)[i];
}
/* Column-major: C = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n; A and B fp32, or both
 * bf16 (then only with CUBLAS_COMPUTE_32F, as cuBLAS's table of supported types), C fp32. */
static inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb,
                                                        int m, int n, int k, const void *alpha, const void *A,
                                                        cudaDataType at, int lda, long long sA, const void *B,
                                                        cudaDataType bt, int ldb, long long sB, const void *beta, void *C,
                                                        cudaDataType ctp, int ldc, long long sC, int batch,
                                                        cublasComputeType_t ct, cublasGemmAlgo_t) {
    if ((ta == CUBLAS_OP_N ? lda < m : lda < k) || (tb == CUBLAS_OP_N ? ldb < k : ldb < n) || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (at != bt || ctp != CUDA_R_32F || (at == CUDA_R_16BF && ct != CUBLAS_COMPUTE_32F)) return CUBLAS_STATUS_INVALID_VALUE;
    const long es = at == CUDA_R_16BF ? 2 : 4;
    float al = *(const float *)alpha, be = *(const float *)beta;
    for (int b = 0; b < batch; b++) {
        const char *a = (const char *)A + b * sA * es, *bb = (const char *)B + b * sB * es;
        float *c = (float *)C + b * sC;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int l = 0; l < k; l++) {
                    float x = emu_load(at, a, ta == CUBLAS_OP_N ? i + (long)l * lda : l + (long)i * lda);
                    float y = emu_load(bt, bb, tb == CUBLAS_OP_N ? l + (long)j * ldb : j + (long)l * ldb);
                    if (ct == CUBLAS_COMPUTE_32F_FAST_16BF) {
                        x = emu_bf16(x);
                        y = emu_bf16(y);
                    }
                    s += (double)x * y;
                }
                float *cij = c + i + (long)j * ldc;
                *cij = be == 0.0f ? (float)(al * s) : (float)(al * s + be * *cij);
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* The pointer-array form: each product is the strided form's with one batch. */
static inline cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void *alpha, const void *const *A, cudaDataType at,
                                                 int lda, const void *const *B, cudaDataType bt, int ldb, const void *beta,
                                                 void *const *C, cudaDataType ctp, int ldc, int batch,
                                                 cublasComputeType_t ct, cublasGemmAlgo_t al) {
    for (int b = 0; b < batch; b++) {
        cublasStatus_t st = cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A[b], at, lda, 0, B[b], bt, ldb, 0,
                                                       beta, C[b], ctp, ldc, 0, 1, ct, al);
        if (st) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuBLASLt (gemm_ex.cu) ---- */
#include "emu_cublaslt.h"

/* ---- bf16 and the warp matrix functions (attention_mma.cu) ---- */
#include "emu_wmma.h"

/* ---- cuDNN: reference loops (convolution, batch norm) ---- */
#include "emu_cudnn.h"

#endif
