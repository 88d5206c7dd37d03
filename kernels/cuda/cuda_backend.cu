/* cuda_backend.cu — the CUDA op table, device storage and process-wide state.
 *
 * Storage: a caching allocator over plain cudaMalloc (never managed memory). Freed blocks go to a
 * size-keyed cache and are reused by later allocations of a similar size, so a training step's
 * arena growth costs cudaMalloc only on the first step. On an out-of-memory failure the cache is
 * returned to the driver and the allocation retried once.
 *
 * Ordering: every table function enqueues on one process-wide stream (cuda_stream()); copies to
 * the host synchronise it, so host code sees finished results. The CPU table
 * (kernels/cpu/backend_cpu.c) is the reference each kernel mirrors. */
#include <cublas_v2.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <mutex>
#include <unordered_map>

extern "C" {
#include "nn/base/base.h"
}
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

/* ---- process-wide state ---- */
static std::once_flag g_once;
static int g_ndev = 0;           /* usable devices (0: none / no driver) */
static int g_ready = 0;          /* stream + handles created */
static char g_devname[300] = "";
static cudaStream_t g_stream = 0;
static cublasHandle_t g_cublas = 0;
static cudnnHandle_t g_cudnn = 0;   /* made by cuda_cudnn() on first use */
static int g_dev = 0;             /* the device the stream and handles belong to */
static double *g_red_partials = NULL, *g_red_partials_host = NULL; /* cuda_common.h */
static cuda_multi_scratch g_multi; /* cuda_common.h: sumsq_many */
static std::mutex g_err_mu;
static char g_err[512] = "";

int cuda_record(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return 0;
    std::lock_guard<std::mutex> lk(g_err_mu);
    if (!g_err[0])
        snprintf(g_err, sizeof g_err, "%s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
    return 1;
}

void cuda_record_msg(const char *msg, const char *file, int line) {
    std::lock_guard<std::mutex> lk(g_err_mu);
    if (!g_err[0]) snprintf(g_err, sizeof g_err, "%s:%d: %s", file, line, msg);
}

/* Stream, cuBLAS handle and reduction scratch of device `dev` (the process-lifetime state the
 * kernels use; kernels themselves never allocate). 0 on success. */
static int open_device(int dev) {
    cudaDeviceProp prop;
    if (cudaSetDevice(dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    snprintf(g_devname, sizeof g_devname, "%.200s (sm_%d%d, %.0f GiB)", prop.name, prop.major,
             prop.minor, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    if (CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking))) return 1;
    if (cublasCreate(&g_cublas) != CUBLAS_STATUS_SUCCESS) {
        cuda_record_msg("cublasCreate failed", __FILE__, __LINE__);
        return 1;
    }
    cublasSetStream(g_cublas, g_stream);
    if (CUDA_CHECK(cudaMalloc(&g_red_partials, CUDA_RED_BLOCKS * sizeof(double))) ||
        CUDA_CHECK(cudaMallocHost(&g_red_partials_host, CUDA_RED_BLOCKS * sizeof(double))))
        return 1;
    cuda_multi_scratch &m = g_multi;
    if (CUDA_CHECK(cudaMalloc(&m.ptrs, CUDA_MULTI_MAX * sizeof(float *))) ||
        CUDA_CHECK(cudaMalloc(&m.ns, CUDA_MULTI_MAX * sizeof(int64_t))) ||
        CUDA_CHECK(cudaMalloc(&m.part, (size_t)CUDA_MULTI_MAX * CUDA_MULTI_BLOCKS * sizeof(double))) ||
        CUDA_CHECK(cudaMalloc(&m.res, CUDA_MULTI_MAX * sizeof(double))) ||
        CUDA_CHECK(cudaMallocHost(&m.ptrs_host, CUDA_MULTI_MAX * sizeof(float *))) ||
        CUDA_CHECK(cudaMallocHost(&m.ns_host, CUDA_MULTI_MAX * sizeof(int64_t))) ||
        CUDA_CHECK(cudaMallocHost(&m.res_host, CUDA_MULTI_MAX * sizeof(double))))
        return 1;
    g_dev = dev;
    return 0;
}

static void close_device(void) {
    cuda_wait();
    cuda_upload_ring_close();
    cudaFree(g_red_partials);
    cudaFreeHost(g_red_partials_host);
    cudaFree(g_multi.ptrs); cudaFree(g_multi.ns); cudaFree(g_multi.part); cudaFree(g_multi.res);
    cudaFreeHost(g_multi.ptrs_host); cudaFreeHost(g_multi.ns_host); cudaFreeHost(g_multi.res_host);
    g_multi = cuda_multi_scratch{};
    cublasDestroy(g_cublas);
    if (g_cudnn) cudnnDestroy(g_cudnn);
    g_cudnn = 0;
    cudaStreamDestroy(g_stream);
    g_red_partials = g_red_partials_host = NULL;
    g_cublas = 0;
    g_stream = 0;
}

static void init_once(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError(); /* clear the sticky "no device" status */
        g_ndev = 0;
        return;
    }
    int dev = 0;
    const char *env = getenv("ENDORET_CUDA_DEVICE");
    if (env && *env) dev = atoi(env);
    if (dev < 0 || dev >= n) dev = 0;
    if (open_device(dev)) return;
    g_ndev = n;
    g_ready = 1;
}

/* The current device is per host thread in the CUDA runtime: a loader or OpenMP thread that
 * allocates or launches must first select the backend's device (cuda:N), or it would use GPU 0. */
static thread_local int t_dev = -1;

static int ready(void) {
    std::call_once(g_once, init_once);
    if (g_ready && t_dev != g_dev) {
        cudaSetDevice(g_dev);
        t_dev = g_dev;
    }
    return g_ready;
}

extern "C" int cuda_device_count(void) {
    ready();
    return g_ndev;
}

cudaStream_t cuda_stream(void) {
    ready();
    return g_stream;
}

struct cublasContext *cuda_cublas(void) {
    ready();
    return g_cublas;
}

struct cudnnContext *cuda_cudnn(void) {
    if (!ready()) return NULL;
    if (!g_cudnn) {
        cudnnStatus_t st = cudnnCreate(&g_cudnn);
        if (st != CUDNN_STATUS_SUCCESS) {
            char msg[200];
            snprintf(msg, sizeof msg, "cudnnCreate: %s", cudnnGetErrorString(st));
            cuda_record_msg(msg, __FILE__, __LINE__);
            g_cudnn = 0;
            return NULL;
        }
        cudnnSetStream(g_cudnn, g_stream);
    }
    return g_cudnn;
}

double *cuda_red_partials(void) {
    ready();
    return g_red_partials;
}
double *cuda_red_partials_host(void) {
    ready();
    return g_red_partials_host;
}
const cuda_multi_scratch *cuda_multi(void) {
    ready();
    return g_multi.res ? &g_multi : NULL;
}

extern "C" const char *cuda_backend_error(void) {
    std::lock_guard<std::mutex> lk(g_err_mu);
    return g_err[0] ? g_err : NULL;
}

extern "C" void cuda_backend_clear_error(void) {
    std::lock_guard<std::mutex> lk(g_err_mu);
    g_err[0] = 0;
}

extern "C" int cuda_synchronize(void) {
    if (!ready()) return 1;
    return CUDA_CHECK(cuda_wait());
}

extern "C" const char *cuda_backend_describe(void) {
    static char buf[512];
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    size_t dnn = cudnnGetVersion();
    int cbl_major = 0, cbl_minor = 0, cbl_patch = 0;
    cublasGetProperty(MAJOR_VERSION, &cbl_major);
    cublasGetProperty(MINOR_VERSION, &cbl_minor);
    cublasGetProperty(PATCH_LEVEL, &cbl_patch);
    int n = cuda_device_count();
    char dev[340];
    if (n > 0) snprintf(dev, sizeof dev, "device: %s", g_devname);
    else snprintf(dev, sizeof dev, "no device");
    /* cuDNN 9 encodes its version as major*10000 + minor*100 + patch. */
    snprintf(buf, sizeof buf,
             "compiled (CUDA %d.%d, cuDNN %zu.%zu.%zu, cuBLAS %d.%d.%d, sm_80+sm_90; %s)",
             rt / 1000, (rt % 1000) / 10, dnn / 10000, (dnn % 10000) / 100, dnn % 100, cbl_major,
             cbl_minor, cbl_patch, dev);
    return buf;
}

/* ---- caching allocator ---- */
static std::mutex g_mem_mu;
static std::multimap<size_t, void *> g_cache;       /* rounded size -> free block */
static std::unordered_map<void *, size_t> g_live;   /* block -> rounded size */
static size_t g_cached = 0, g_live_bytes = 0, g_live_peak = 0;

/* 512-byte granularity below 1 MiB, 2 MiB above: few distinct sizes, little waste. */
static size_t round_size(size_t b) {
    if (b == 0) b = 1;
    if (b < (1u << 20)) return (b + 511) & ~(size_t)511;
    const size_t g = 2u << 20;
    return (b + g - 1) / g * g;
}

static void empty_cache_locked(void) {
    for (auto &kv : g_cache) cudaFree(kv.second);
    g_cache.clear();
    g_cached = 0;
}

static void *cu_alloc(size_t bytes) {
    if (!ready()) {
        cuda_record_msg("alloc: no CUDA device", __FILE__, __LINE__);
        return NULL;
    }
    size_t sz = round_size(bytes);
    std::lock_guard<std::mutex> lk(g_mem_mu);
    /* Reuse a cached block of at least sz bytes but not more than twice as large. */
    auto it = g_cache.lower_bound(sz);
    if (it != g_cache.end() && it->first <= 2 * sz) {
        void *p = it->second;
        size_t have = it->first;
        g_cache.erase(it);
        g_cached -= have;
        g_live[p] = have;
        g_live_bytes += have;
        if (g_live_bytes > g_live_peak) g_live_peak = g_live_bytes;
        return p;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, sz);
    if (e != cudaSuccess) {
        cudaGetLastError();
        cuda_wait(); /* cached blocks may still be in use by queued kernels */
        empty_cache_locked();
        e = cudaMalloc(&p, sz);
    }
    if (e != cudaSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "cudaMalloc(%zu bytes) failed (%zu bytes in use)", sz, g_live_bytes);
        cuda_record(e, msg, __FILE__, __LINE__);
        return NULL;
    }
    g_live[p] = sz;
    g_live_bytes += sz;
    if (g_live_bytes > g_live_peak) g_live_peak = g_live_bytes;
    return p;
}

/* A freed block may still be read by kernels queued on the stream; since every later user of the
 * block enqueues on the same stream, reuse is ordered after them (no sync needed). */
static void cu_free(void *p) {
    if (!p) return;
    std::lock_guard<std::mutex> lk(g_mem_mu);
    auto it = g_live.find(p);
    if (it == g_live.end()) {
        cuda_record_msg("free: pointer not from this allocator", __FILE__, __LINE__);
        return;
    }
    g_cache.insert(std::make_pair(it->second, p));
    g_cached += it->second;
    g_live_bytes -= it->second;
    g_live.erase(it);
}

static void cuda_memory_stats(size_t *peak_in_use, size_t *cached) {
    std::lock_guard<std::mutex> lk(g_mem_mu);
    *peak_in_use = g_live_peak;
    *cached = g_cached;
}
static void empty_cache_and_wait(void) {
    cuda_wait();
    std::lock_guard<std::mutex> lk(g_mem_mu);
    empty_cache_locked();
}
extern "C" void cuda_empty_cache(void) {
    if (ready()) empty_cache_and_wait();
}

/* ---- copies ---- */
static void cu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream()));
}
/* From pageable host memory, the caller's buffer free on return: staged (host_wait.cu). */
static void cu_upload(void *dst, const void *src, size_t bytes) {
    if (ready()) cuda_upload_staged(dst, src, bytes);
    else cuda_record_msg("upload: no CUDA device", __FILE__, __LINE__);
}
static void cu_download(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    if (!CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cuda_stream())))
        CUDA_CHECK(cuda_wait());
}
static uint64_t cu_host_waits(void) { return cuda_host_waits(); }

extern "C" void *cuda_host_alloc(size_t bytes) {
    if (!ready()) return NULL;
    void *p = NULL;
    if (CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 64))) return NULL;
    return p;
}
extern "C" void cuda_host_free(void *p) {
    if (p) CUDA_CHECK(cudaFreeHost(p));
}
extern "C" void cuda_upload_async(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_stream()));
}


/* Moves the stream, handles and scratch to device `index`. Allowed while nothing is allocated
 * (commands select the device before any work), so no live buffer is left on the old one. */
static int cu_set_device(int index) {
    if (!ready()) return er_fail(ER_INPUT, "no usable CUDA device");
    if (index < 0 || index >= g_ndev)
        return er_fail(ER_INPUT, "no CUDA device %d (this machine has %d)", index, g_ndev);
    if (index == g_dev) return ER_OK;
    empty_cache_and_wait();
    {
        std::lock_guard<std::mutex> lk(g_mem_mu);
        if (g_live_bytes)
            return er_fail(ER_RUNTIME, "cannot switch to device %d: %zu bytes still allocated on %d",
                           index, g_live_bytes, g_dev);
    }
    close_device();
    if (open_device(index)) {
        g_ready = 0;
        const char *why = cuda_backend_error();
        return er_fail(ER_RUNTIME, "cannot open CUDA device %d%s%s", index, why ? ": " : "", why ? why : "");
    }
    return ER_OK;
}

/* ---- the table ---- */
static er_backend make_table(void) {
    er_backend t;
    memset(&t, 0, sizeof t);
    t.name = "cuda";
    t.device = DEV_CUDA;
    t.alloc = cu_alloc;
    t.free = cu_free;
    t.copy = cu_copy;
    t.upload = cu_upload;
    t.download = cu_download;
    t.host_alloc = cuda_host_alloc;
    t.host_free = cuda_host_free;
    t.upload_async = cuda_upload_async;
    t.synchronize = cuda_synchronize;
    t.trim = cuda_empty_cache;
    t.memory_stats = cuda_memory_stats;
    t.host_waits = cu_host_waits;
    t.last_error = cuda_backend_error;
    t.clear_error = cuda_backend_clear_error;
    t.device_count = cuda_device_count;
    t.set_device = cu_set_device;
    cuda_collectives_fill(&t);
#define ER_OP(ret, name, params, args) t.name = cu_##name;
#include "kernels/ops.def"
#undef ER_OP
    return t;
}
static const er_backend g_table = make_table();

/* NULL when no device is usable, after recording one clear message (er_msg()), so that
 * `--device cuda` fails with it. */
extern "C" const er_backend *backend_cuda(void) {
    if (ready()) return &g_table;
    const char *why = cuda_backend_error();
    er_fail(ER_RUNTIME, "no usable CUDA device (%s)%s%s", cuda_backend_describe(),
            why ? ": " : "", why ? why : "");
    return NULL;
}
