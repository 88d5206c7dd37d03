/* optim.cu — fused optimizer ops on raw device arrays (one pass over p, g, m, v), mirroring
 * cpu_adamw / cpu_sgd / cpu_sumsq_many / cpu_scale / cpu_all_finite of kernels/cpu/optim.c: the same
 * per-element float expressions in the same order. */
#include <math.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

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

void cu_adamw(float *p, const float *g, float *m, float *v, int64_t n, const adamw_args *a) {
    if (n <= 0) return;
    const float decay = 1.0f - a->lr * a->weight_decay;
    k_adamw<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(
        p, g, m, v, n, decay, a->beta1, a->beta2, 1.0f - a->beta1, 1.0f - a->beta2, a->step_size,
        a->inv_sqrt_bc2, a->eps, a->gscale);
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

void cu_sgd(float *p, const float *g, float *buf, int64_t n, const sgd_args *a) {
    if (n <= 0) return;
    if (a->momentum == 0.0f) buf = NULL;
    k_sgd<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(
        p, g, buf, n, a->lr, a->momentum, a->weight_decay, a->gscale, a->nesterov, a->first);
    CUDA_LAUNCHED("sgd_step");
}

__global__ void k_scale(float *x, int64_t n, float s) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

void cu_scale(float *x, int64_t n, float s) {
    if (n <= 0) return;
    k_scale<<<cuda_blocks(n, OPT_THREADS), OPT_THREADS, 0, cuda_stream()>>>(x, n, s);
    CUDA_LAUNCHED("scale");
}

/* Reductions to one number: a fixed grid of at most CUDA_RED_BLOCKS blocks writes per-block
 * partials to cuda_red_partials() (device) and copies them to cuda_red_partials_host() (pinned):
 * buffers the backend allocates once per device in its init. Summed on the host in block order:
 * deterministic. */
__global__ void k_nonfinite(const float *x, int64_t n, double *part) {
    double bad = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) bad += 1.0;
    bad = cu_block_sum_d(bad);
    if (threadIdx.x == 0) part[blockIdx.x] = bad;
}

/* Blocks for n elements: up to CUDA_RED_BLOCKS, fewer for small tensors (biases, norms) so they cost one
 * small launch; the partials are summed in block order, so the result is deterministic for each n. */
static int red_blocks(int64_t n) {
    int64_t b = (n + OPT_THREADS - 1) / OPT_THREADS;
    return b < 1 ? 1 : b > CUDA_RED_BLOCKS ? CUDA_RED_BLOCKS : (int)b;
}

static double sum_partials(int nb) {
    cudaStream_t st = cuda_stream();
    double *host = cuda_red_partials_host();
    if (CUDA_CHECK(cudaMemcpyAsync(host, cuda_red_partials(), nb * sizeof(double), cudaMemcpyDeviceToHost, st)))
        return NAN;
    if (CUDA_CHECK(cudaStreamSynchronize(st))) return NAN;
    double s = 0.0;
    for (int b = 0; b < nb; b++) s += host[b];
    return s;
}

/* sumsq_many: blockIdx.y = array, CUDA_MULTI_BLOCKS blocks stride over it; part[a][b] */
__global__ void k_sumsq_many(const float *const *ptrs, const int64_t *ns, double *part) {
    const float *x = ptrs[blockIdx.y];
    const int64_t n = ns[blockIdx.y];
    double s = 0.0;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        s += (double)x[i] * (double)x[i];
    s = cu_block_sum_d(s);
    if (threadIdx.x == 0) part[(int64_t)blockIdx.y * CUDA_MULTI_BLOCKS + blockIdx.x] = s;
}
/* res[a] = its partials added in block order (deterministic) */
__global__ void k_sum_partials(int count, const double *part, double *res) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= count) return;
    double s = 0.0;
    for (int b = 0; b < CUDA_MULTI_BLOCKS; b++) s += part[(int64_t)a * CUDA_MULTI_BLOCKS + b];
    res[a] = s;
}

/* Chunks of CUDA_MULTI_MAX arrays: stage pointers and lengths, two launches, one copy back and one
 * synchronisation per chunk (one for any model of up to 1024 parameter tensors). */
void cu_sumsq_many(int count, const float *const *xs, const int64_t *ns, double *out) {
    const cuda_multi_scratch *m = cuda_multi();
    for (int c0 = 0; c0 < count; c0 += CUDA_MULTI_MAX) {
        int c = count - c0 < CUDA_MULTI_MAX ? count - c0 : CUDA_MULTI_MAX;
        if (!m) {
            for (int i = 0; i < c; i++) out[c0 + i] = NAN;
            continue;
        }
        cudaStream_t st = cuda_stream();
        for (int i = 0; i < c; i++) {
            m->ptrs_host[i] = xs[c0 + i];
            m->ns_host[i] = ns[c0 + i] > 0 ? ns[c0 + i] : 0;
        }
        if (CUDA_CHECK(cudaMemcpyAsync(m->ptrs, m->ptrs_host, c * sizeof(float *), cudaMemcpyHostToDevice, st)) ||
            CUDA_CHECK(cudaMemcpyAsync(m->ns, m->ns_host, c * sizeof(int64_t), cudaMemcpyHostToDevice, st))) {
            for (int i = 0; i < c; i++) out[c0 + i] = NAN;
            continue;
        }
        k_sumsq_many<<<dim3(CUDA_MULTI_BLOCKS, (unsigned)c), OPT_THREADS, 0, st>>>(m->ptrs, m->ns, m->part);
        k_sum_partials<<<(unsigned)((c + 127) / 128), 128, 0, st>>>(c, m->part, m->res);
        CUDA_LAUNCHED("sumsq_many");
        bool bad = CUDA_CHECK(cudaMemcpyAsync(m->res_host, m->res, c * sizeof(double), cudaMemcpyDeviceToHost, st)) ||
                   CUDA_CHECK(cudaStreamSynchronize(st)); /* also frees the staging for the next chunk */
        for (int i = 0; i < c; i++) out[c0 + i] = bad ? NAN : m->res_host[i];
    }
}

int cu_all_finite(const float *x, int64_t n) {
    if (n <= 0) return 1;
    if (!cuda_red_partials()) return 0;
    int nb = red_blocks(n);
    k_nonfinite<<<nb, OPT_THREADS, 0, cuda_stream()>>>(x, n, cuda_red_partials());
    CUDA_LAUNCHED("all_finite");
    return sum_partials(nb) == 0.0;
}
