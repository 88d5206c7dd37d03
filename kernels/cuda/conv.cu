/* conv.cu — convolution and batch norm on the GPU through cuDNN, mirroring cpu_conv2d,
 * cpu_conv2d_backward (kernels/cpu/conv.c), cpu_batchnorm and cpu_batchnorm_backward
 * (kernels/cpu/bnorm.c).
 *
 * Convolution: cuDNN's forward / backward-data / backward-filter / backward-bias. In fp32 mode with
 * FMA maths (no TF32, so fp32 results match the CPU within summation order); in bf16 mode
 * (the args' `compute` is GEMM_COMPUTE_BF16, "matmul inputs rounded") with cuDNN's default maths, i.e. TF32 tensor cores:
 * inputs rounded to 10 mantissa bits, finer than bf16's 7, the storage stays fp32 NCHW. The
 * algorithm is the first of cuDNN's heuristic list that runs, needs at most CONV_WS_MAX bytes and,
 * for the backward passes, is deterministic; the *_workspace entry makes the same choice, so the
 * caller's arena supplies exactly the scratch the call uses (kernels never allocate). The choice is
 * cached per shape, layout, storage type and maths (conv_dnn.h: conv_nhwc.cu shares the cache and
 * the descriptor set-up; a heuristic query costs about a millisecond of host time: measured
 * on an H100, 227 of ResNet-50's 628 ms training step before the cache, bench/RESULTS_cuda.md).
 * Batch norm: cuDNN's spatial training forward (batch statistics, running-stat update with the
 * unbiased variance, saved mean / inverse std) and its training backward when the input gradient
 * is wanted; own kernels for eval mode (one multiply-add per element, the ReLU fused) and for the
 * weight / bias gradients alone (cuDNN has neither).
 * Descriptors are process-lifetime host objects made once and re-set per call, like the handle. */
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/conv_dnn.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define CONV_WS_MAX ((size_t)1 << 30)

bool dnn_ok(cudnnStatus_t st, const char *what, int line) {
    if (st == CUDNN_STATUS_SUCCESS) return true;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s", what, cudnnGetErrorString(st));
    cuda_record_msg(msg, __FILE__, line);
    return false;
}

struct dnn_descs {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    bool made;
};
static dnn_descs g_d;

/* The handle, with the descriptors made on first use; NULL (error recorded) if cuDNN fails. */
static cudnnHandle_t dnn(void) {
    cudnnHandle_t h = cuda_cudnn();
    if (!h) return NULL;
    if (!g_d.made) {
        if (!DNN(cudnnCreateTensorDescriptor(&g_d.x)) || !DNN(cudnnCreateTensorDescriptor(&g_d.y)) ||
            !DNN(cudnnCreateTensorDescriptor(&g_d.b)) || !DNN(cudnnCreateFilterDescriptor(&g_d.w)) ||
            !DNN(cudnnCreateConvolutionDescriptor(&g_d.conv)))
            return NULL;
        g_d.made = true;
    }
    return h;
}

/* ---- convolution ---- */

/* fp32 products in fp32 (no TF32); bf16 products of fp32 storage: cuDNN's default (TF32); bf16
 * storage: tensor cores. */
static cudnnMathType_t conv_math(const conv_key *k) {
    if (k->dt == ER_BF16) return CUDNN_TENSOR_OP_MATH;
    return k->a.compute == GEMM_COMPUTE_BF16 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* The algorithms chosen for one key (have: 1 forward, 2 backward data, 4 backward filter).
 * Full: round robin. */
#define ALGO_CACHE 256
struct algo_entry {
    conv_key k;
    int have;
    cudnnConvolutionFwdAlgoPerf_t f;
    cudnnConvolutionBwdDataAlgoPerf_t d;
    cudnnConvolutionBwdFilterAlgoPerf_t w;
};
static algo_entry g_algo[ALGO_CACHE];
static int g_nalgo, g_algo_next;

static algo_entry *algo_of(const conv_key *k) {
    for (int i = 0; i < g_nalgo; i++)
        if (!memcmp(&g_algo[i].k, k, sizeof *k)) return &g_algo[i];
    algo_entry *e = g_nalgo < ALGO_CACHE ? &g_algo[g_nalgo++] : &g_algo[g_algo_next++ % ALGO_CACHE];
    memset(e, 0, sizeof *e);
    e->k = *k;
    return e;
}

/* Descriptors made on first use (when d's are NULL), then re-set per call. */
cudnnHandle_t conv_set_descs(const conv_key *k, conv_dnn *d) {
    cudnnHandle_t h = cuda_cudnn();
    if (!h) return NULL;
    if (!d->conv && (!DNN(cudnnCreateTensorDescriptor(&d->x)) || !DNN(cudnnCreateTensorDescriptor(&d->y)) ||
                     !DNN(cudnnCreateFilterDescriptor(&d->w)) || !DNN(cudnnCreateConvolutionDescriptor(&d->conv))))
        return NULL;
    const conv2d_args *a = &k->a;
    const cudnnTensorFormat_t F = k->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; /* filter: KRSC / KCRS */
    const cudnnDataType_t T = k->dt == ER_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    if (!DNN(cudnnSetTensor4dDescriptor(d->x, F, T, a->N, a->C, a->H, a->W)) ||
        !DNN(cudnnSetTensor4dDescriptor(d->y, F, T, a->N, a->K, a->P, a->Q)) ||
        !DNN(cudnnSetFilter4dDescriptor(d->w, T, F, a->K, a->C / a->groups, a->R, a->S)) ||
        !DNN(cudnnSetConvolution2dDescriptor(d->conv, a->ph, a->pw, a->sh, a->sw, a->dh, a->dw,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
        !DNN(cudnnSetConvolutionGroupCount(d->conv, a->groups)) ||
        !DNN(cudnnSetConvolutionMathType(d->conv, conv_math(k))))
        return NULL;
    return h;
}

/* The NCHW fp32 op's key and descriptors (the shared set, plus the bias descriptor). */
static cudnnHandle_t conv_descs(const conv2d_args *a, conv_key *k, conv_dnn *d) {
    if (!dnn()) return NULL;
    *k = conv_key{*a, ER_F32, 0};
    *d = conv_dnn{g_d.x, g_d.y, g_d.w, g_d.conv};
    cudnnHandle_t h = conv_set_descs(k, d);
    if (!h || !DNN(cudnnSetTensor4dDescriptor(g_d.b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, a->K, 1, 1))) return NULL;
    return h;
}

/* The first usable entry of a heuristic list (status, memory, determinism when asked). */
template <class Perf>
static bool pick(const Perf *perf, int n, bool deterministic, Perf *out) {
    for (int i = 0; i < n; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > CONV_WS_MAX) continue;
        if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
        *out = perf[i];
        return true;
    }
    cuda_record_msg("conv2d: cuDNN offers no usable algorithm", __FILE__, __LINE__);
    return false;
}

/* The cached choice of one pass (bit `bit` of the entry's have, stored in `slot`), asking cuDNN's
 * heuristics through query(&n, perf) on the first call for a key (its descriptors set). */
template <int N, class Perf, class Query>
static bool cached_algo(algo_entry *e, int bit, Perf &slot, bool deterministic, const char *what, int line, Query query,
                        Perf *p) {
    if (!(e->have & bit)) {
        Perf perf[N];
        int n = 0;
        if (!dnn_ok(query(&n, perf), what, line) || !pick(perf, n, deterministic, &slot)) return false;
        e->have |= bit;
    }
    *p = slot;
    return true;
}
bool conv_fwd_algo(cudnnHandle_t h, const conv_key *k, const conv_dnn *d, cudnnConvolutionFwdAlgoPerf_t *p) {
    algo_entry *e = algo_of(k);
    return cached_algo<CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
        e, 1, e->f, false, "cudnnGetConvolutionForwardAlgorithm_v7", __LINE__,
        [&](int *n, cudnnConvolutionFwdAlgoPerf_t *perf) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n, perf);
        }, p);
}
bool conv_bwd_data_algo(cudnnHandle_t h, const conv_key *k, const conv_dnn *d, cudnnConvolutionBwdDataAlgoPerf_t *p) {
    algo_entry *e = algo_of(k);
    return cached_algo<CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
        e, 2, e->d, true, "cudnnGetConvolutionBackwardDataAlgorithm_v7", __LINE__,
        [&](int *n, cudnnConvolutionBwdDataAlgoPerf_t *perf) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perf);
        }, p);
}
bool conv_bwd_filter_algo(cudnnHandle_t h, const conv_key *k, const conv_dnn *d, cudnnConvolutionBwdFilterAlgoPerf_t *p) {
    algo_entry *e = algo_of(k);
    return cached_algo<CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        e, 4, e->w, true, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", __LINE__,
        [&](int *n, cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w,
                                                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perf);
        }, p);
}

size_t cu_conv2d_workspace(const conv2d_args *a) {
    conv_key k;
    conv_dnn d;
    cudnnHandle_t h = conv_descs(a, &k, &d);
    cudnnConvolutionFwdAlgoPerf_t p;
    return h && conv_fwd_algo(h, &k, &d, &p) ? dnn_floats(p.memory) : 0;
}

void cu_conv2d(const conv2d_args *a, const float *x, const float *w, const float *b, float *y,
               float *work) {
    conv_key k;
    conv_dnn d;
    cudnnHandle_t h = conv_descs(a, &k, &d);
    cudnnConvolutionFwdAlgoPerf_t p;
    if (!h || !conv_fwd_algo(h, &k, &d, &p)) return;
    const float one = 1.0f, zero = 0.0f;
    if (!DNN(cudnnConvolutionForward(h, &one, g_d.x, x, g_d.w, w, g_d.conv, p.algo, work, p.memory,
                                     &zero, g_d.y, y)))
        return;
    if (b) DNN(cudnnAddTensor(h, &one, g_d.b, b, &one, g_d.y, y));
}

/* The larger of the two backward passes' needs: the call may run either or both. */
size_t cu_conv2d_backward_workspace(const conv2d_args *a) {
    conv_key k;
    conv_dnn d;
    cudnnHandle_t h = conv_descs(a, &k, &d);
    cudnnConvolutionBwdDataAlgoPerf_t pd;
    cudnnConvolutionBwdFilterAlgoPerf_t pf;
    if (!h || !conv_bwd_data_algo(h, &k, &d, &pd) || !conv_bwd_filter_algo(h, &k, &d, &pf)) return 0;
    return dnn_floats(pd.memory > pf.memory ? pd.memory : pf.memory);
}

void cu_conv2d_backward(const conv2d_args *a, const float *x, const float *w, const float *gy,
                        float *gx, float *gw, float *gb, float *work, int gx_acc) {
    conv_key k;
    conv_dnn d;
    cudnnHandle_t h = conv_descs(a, &k, &d);
    if (!h) return;
    /* beta 1: the gradients accumulate; gx's beta 0 (a fresh buffer) writes it without reading */
    const float one = 1.0f, zero = 0.0f;
    if (gb) DNN(cudnnConvolutionBackwardBias(h, &one, g_d.y, gy, &one, g_d.b, gb));
    if (gx) {
        cudnnConvolutionBwdDataAlgoPerf_t p;
        if (conv_bwd_data_algo(h, &k, &d, &p))
            DNN(cudnnConvolutionBackwardData(h, &one, g_d.w, w, g_d.y, gy, g_d.conv, p.algo, work,
                                             p.memory, gx_acc ? &one : &zero, g_d.x, gx));
    }
    if (gw) {
        cudnnConvolutionBwdFilterAlgoPerf_t p;
        if (conv_bwd_filter_algo(h, &k, &d, &p))
            DNN(cudnnConvolutionBackwardFilter(h, &one, g_d.x, x, g_d.y, gy, g_d.conv, p.algo, work,
                                               p.memory, &one, g_d.w, gw));
    }
}

/* ---- batch norm ---- */

#define BN_THREADS 256

/* x [N, C, HW] as cuDNN's N x C x HW x 1, statistics 1 x C x 1 x 1. */
static cudnnHandle_t bn_descs(int64_t N, int64_t C, int64_t HW) {
    cudnnHandle_t h = dnn();
    if (!h) return NULL;
    if (N > INT32_MAX || C > INT32_MAX || HW > INT32_MAX) {
        cuda_record_msg("batchnorm: tensor too large for cuDNN", __FILE__, __LINE__);
        return NULL;
    }
    if (!DNN(cudnnSetTensor4dDescriptor(g_d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)N, (int)C, (int)HW, 1)) ||
        !DNN(cudnnSetTensor4dDescriptor(g_d.b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, (int)C, 1, 1)))
        return NULL;
    return h;
}

/* mean = running_mean, rstd = 1 / sqrt(running_var + eps) in double, as cpu_batchnorm */
__global__ void k_bn_eval_stats(int64_t C, const float *rm, const float *rv, float eps, float *mean,
                                float *rstd) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
        mean[c] = rm[c];
        rstd[c] = (float)(1.0 / sqrt((double)rv[c] + eps));
    }
}

/* y = x * scale + shift (scale = rstd w, shift = b - mean scale), then the optional ReLU; with
 * mean/rstd NULL (after cuDNN's training forward) only the ReLU, in place. */
__global__ void k_bn_apply(int64_t n, int64_t C, int64_t HW, const float *x, const float *w,
                           const float *b, const float *mean, const float *rstd, int relu, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        if (mean) {
            int64_t c = i / HW % C;
            float scale = rstd[c] * w[c];
            v = v * scale + (b[c] - mean[c] * scale);
        }
        y[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

void cu_batchnorm(int64_t N, int64_t C, int64_t HW, const float *x, const float *w, const float *b,
                  float *running_mean, float *running_var, int training, float momentum, float eps,
                  int relu, float *y, float *mean, float *rstd) {
    const int64_t n = N * C * HW;
    if (n <= 0) return;
    if (!training) {
        k_bn_eval_stats<<<cuda_blocks(C, BN_THREADS), BN_THREADS, 0, cuda_stream()>>>(C, running_mean, running_var, eps, mean, rstd);
        k_bn_apply<<<cuda_blocks(n, BN_THREADS), BN_THREADS, 0, cuda_stream()>>>(n, C, HW, x, w, b, mean, rstd, relu, y);
        CUDA_LAUNCHED("batchnorm (eval)");
        return;
    }
    cudnnHandle_t h = bn_descs(N, C, HW);
    if (!h) return;
    const float one = 1.0f, zero = 0.0f;
    if (!DNN(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, g_d.x, x,
                                                    g_d.x, y, g_d.b, w, b, momentum, running_mean,
                                                    running_var, eps, mean, rstd)))
        return;
    if (relu) {
        k_bn_apply<<<cuda_blocks(n, BN_THREADS), BN_THREADS, 0, cuda_stream()>>>(n, C, HW, y, w, b, NULL, NULL, 1, y);
        CUDA_LAUNCHED("batchnorm relu");
    }
}

/* gy of the BN output: with the fused ReLU (relu_y given), gy where the forward's output y > 0 */
__device__ __forceinline__ float bn_gy(const float *gy, const float *relu_y, int64_t i) {
    return relu_y && !(relu_y[i] > 0.0f) ? 0.0f : gy[i];
}

/* One block per channel: sg = sum gy, sgx = sum gy xh (double); gb += sg, gw += sgx and, when gx
 * is given, gx += w rstd (gy - [training] (sg + xh sgx) / M); gy masked by the fused ReLU's output. */
__global__ void k_bn_backward(int64_t N, int64_t C, int64_t HW, const float *x, const float *w,
                              const float *mean, const float *rstd, const float *gy, const float *relu_y,
                              int training, float *gx, float *gw, float *gb, int gx_acc) {
    const int64_t c = blockIdx.x, M = N * HW;
    const float mu = mean[c], rs = rstd[c];
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
        int64_t i = (j / HW * C + c) * HW + j % HW;
        float g = bn_gy(gy, relu_y, i);
        sg += g;
        sgx += (double)g * ((x[i] - mu) * rs);
    }
    sg = cu_block_sum_d(sg);
    sgx = cu_block_sum_d(sgx);
    if (threadIdx.x == 0) {
        if (gb) gb[c] += (float)sg;
        if (gw) gw[c] += (float)sgx;
    }
    if (!gx) return;
    const float k = w[c] * rs, m1 = training ? (float)(sg / (double)M) : 0.0f;
    const float m2 = training ? (float)(sgx / (double)M) : 0.0f;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
        int64_t i = (j / HW * C + c) * HW + j % HW;
        gx[i] = (gx_acc ? gx[i] : 0.0f) + k * (bn_gy(gy, relu_y, i) - m1 - (x[i] - mu) * rs * m2);
    }
}

/* the fused ReLU's backward before cuDNN's BN backward: g = y > 0 ? gy : 0 */
__global__ void k_relu_mask(int64_t n, const float *y, const float *gy, float *g) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        g[i] = y[i] > 0.0f ? gy[i] : 0.0f;
}

/* cuDNN's training backward writes a weight and bias gradient even when the op wants neither:
 * 2 C floats of scratch for those; with the fused ReLU also the masked gy (N C HW floats). */
size_t cu_batchnorm_backward_workspace(int64_t N, int64_t C, int64_t HW, int relu) {
    return (size_t)(2 * C) + (relu ? (size_t)(N * C * HW) : 0);
}

void cu_batchnorm_backward(int64_t N, int64_t C, int64_t HW, const float *x, const float *w,
                           const float *mean, const float *rstd, const float *gy, const float *relu_y,
                           int training, float eps, float *gx, float *gw, float *gb, float *work, int gx_acc) {
    if (N * C * HW <= 0 || C > 2147483647) return;
    if (!training || !gx) {
        k_bn_backward<<<(unsigned)C, BN_THREADS, 0, cuda_stream()>>>(N, C, HW, x, w, mean, rstd, gy, relu_y, training, gx, gw, gb,
                                                                     gx_acc);
        CUDA_LAUNCHED("batchnorm_backward");
        return;
    }
    cudnnHandle_t h = bn_descs(N, C, HW);
    if (!h) return;
    if (relu_y) {
        const int64_t n = N * C * HW;
        float *g = work + 2 * C;
        k_relu_mask<<<cuda_blocks(n, BN_THREADS), BN_THREADS, 0, cuda_stream()>>>(n, relu_y, gy, g);
        CUDA_LAUNCHED("batchnorm_backward relu");
        gy = g;
    }
    const float one = 1.0f, zero = 0.0f;
    /* gw and gb share one blend factor: both accumulate, or (when the op wants neither or only
     * one) the missing one lands in scratch; gx's beta 0 (a fresh buffer) writes it without reading */
    float *dw = gw ? gw : work, *dbias = gb ? gb : work + C;
    DNN(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, gx_acc ? &one : &zero, &one, &one, g_d.x, x,
                                        g_d.x, gy, g_d.x, gx, g_d.b, w, dw, dbias, eps, mean, rstd));
}
