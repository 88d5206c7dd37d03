/* optim.cu — fused optimizer steps on raw device arrays (one pass over p, g, m, v), mirroring
 * adamw_update_f32 / sgd_update_f32 / sumsq_f32 / scale_f32 / all_finite_f32 of
 * kernels/cpu/optim_kernels.c (branch `optim`): the same per-element float expressions in the
 * same order. */
#include <math.h>

extern "C" {
#include "kernels/cpu/optim_kernels.h"
}
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_optim.h"

#define OPT_THREADS 256

__global__ void k_adamw(float *p, const float *g, float *m, float *v, int64_t n, float decay, float b1,
                        float b2, float c1, float c2, float step, float ibc2, float eps, float gs) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float gi = g[i] * gs;
        float mi = b1 * m[i] + c1 * gi;
        float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) * ibc2 + eps;
        p[i] = p[i] * decay - step * (mi / denom);
    }
}

extern "C" void cuda_adamw_step(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                                float beta1, float beta2, float eps, float weight_decay,
                                float step_size, float inv_sqrt_bc2, float gscale) {
    if (n <= 0) return;
    const float decay = 1.0f - lr * weight_decay;
    k_adamw<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(
        p, g, m, v, n, decay, beta1, beta2, 1.0f - beta1, 1.0f - beta2, step_size, inv_sqrt_bc2, eps, gscale);
    CUDA_LAUNCHED("adamw_step");
}

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, float lr, float mu, float wd,
                      float gs, int nesterov, int first) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (!buf) {
            p[i] -= lr * (g[i] * gs + wd * p[i]);
            continue;
        }
        float gi = g[i] * gs + wd * p[i];
        float bi = first ? gi : mu * buf[i] + gi;
        buf[i] = bi;
        float d = nesterov ? gi + mu * bi : bi;
        p[i] -= lr * d;
    }
}

extern "C" void cuda_sgd_step(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                              float weight_decay, float gscale, int nesterov, int first) {
    if (n <= 0) return;
    if (momentum == 0.0f) buf = NULL;
    k_sgd<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(p, g, buf, n, lr, momentum,
                                                                          weight_decay, gscale, nesterov, first);
    CUDA_LAUNCHED("sgd_step");
}

__global__ void k_scale(float *x, int64_t n, float s) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

extern "C" void cuda_scale(float *x, int64_t n, float s) {
    if (n <= 0) return;
    k_scale<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(x, n, s);
    CUDA_LAUNCHED("scale");
}

/* Reductions to one number: a fixed grid of blocks writes per-block partials to a small device
 * scratch (owned here, allocated once), summed on the host in block order: deterministic. */
#define RED_BLOCKS 256
static double *g_partials = NULL;
static double *g_host_partials = NULL;

static bool scratch(void) {
    if (g_partials) return true;
    if (CUDA_CHECK(cudaMalloc(&g_partials, RED_BLOCKS * sizeof(double)))) return false;
    if (CUDA_CHECK(cudaMallocHost(&g_host_partials, RED_BLOCKS * sizeof(double)))) {
        cudaFree(g_partials);
        g_partials = NULL;
        return false;
    }
    return true;
}

__global__ void k_sumsq(const float *x, int64_t n, double *part) {
    double s = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    s = cu_block_sum_d(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void k_nonfinite(const float *x, int64_t n, double *part) {
    double bad = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) bad += 1.0;
    bad = cu_block_sum_d(bad);
    if (threadIdx.x == 0) part[blockIdx.x] = bad;
}

/* Blocks for n elements: up to RED_BLOCKS, fewer for small tensors (biases, norms) so they cost one
 * small launch; the partials are summed in block order, so the result is deterministic for each n. */
static int red_blocks(int64_t n) {
    int64_t b = (n + OPT_THREADS - 1) / OPT_THREADS;
    return b < 1 ? 1 : b > RED_BLOCKS ? RED_BLOCKS : (int)b;
}

static double sum_partials(int nb) {
    cudaStream_t st = cuda_stream();
    if (CUDA_CHECK(cudaMemcpyAsync(g_host_partials, g_partials, nb * sizeof(double), cudaMemcpyDeviceToHost, st)))
        return NAN;
    if (CUDA_CHECK(cudaStreamSynchronize(st))) return NAN;
    double s = 0.0;
    for (int b = 0; b < nb; b++) s += g_host_partials[b];
    return s;
}

extern "C" double cuda_sumsq(const float *x, int64_t n) {
    if (n <= 0) return 0.0;
    if (!scratch()) return NAN;
    int nb = red_blocks(n);
    k_sumsq<<<nb, OPT_THREADS, 0, cuda_stream()>>>(x, n, g_partials);
    CUDA_LAUNCHED("sumsq");
    return sum_partials(nb);
}

extern "C" int cuda_all_finite(const float *x, int64_t n) {
    if (n <= 0) return 1;
    if (!scratch()) return 0;
    int nb = red_blocks(n);
    k_nonfinite<<<nb, OPT_THREADS, 0, cuda_stream()>>>(x, n, g_partials);
    CUDA_LAUNCHED("all_finite");
    return sum_partials(nb) == 0.0;
}

/* ---- the per-device optimizer table nn/optim.c uses (kernels/cpu/optim_kernels.h) ---- */
static void tab_adamw(float *p, const float *g, float *m, float *v, int64_t n, const adamw_args *a) {
    cuda_adamw_step(p, g, m, v, n, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->step_size,
                    a->inv_sqrt_bc2, a->gscale);
}
static void tab_sgd(float *p, const float *g, float *buf, int64_t n, const sgd_args *a) {
    cuda_sgd_step(p, g, buf, n, a->lr, a->momentum, a->weight_decay, a->gscale, a->nesterov, a->first);
}

/* NULL without a device, so nn/optim.c reports it instead of touching device memory. */
extern "C" const optim_kernel_table *optim_kernels_cuda(void) {
    static const optim_kernel_table t = {tab_adamw, tab_sgd, cuda_sumsq, cuda_scale, cuda_all_finite};
    return cuda_device_count() > 0 ? &t : NULL;
}
