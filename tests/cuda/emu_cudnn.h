/* emu_cudnn.h — the part of cuDNN that kernels/cuda uses (convolution forward / backward data /
 * backward filter / backward bias, add tensor, spatial batch norm training forward and backward),
 * as direct reference loops in double on host memory, for tests/cuda/emulate.py (included by
 * emu_cuda.h). What it checks: that kernels/cuda/conv.cu and conv_nhwc.cu map the op table's
 * arguments onto cuDNN's descriptors, blend factors and outputs correctly (NCHW / NHWC tensors,
 * KCRS / KRSC filters, fp32 / bf16 storage, padding, stride, dilation, groups, accumulation,
 * running-stat update, saved mean / inverse std). Tensors are indexed by their descriptor's format;
 * bf16 elements widen exactly on reading and round to nearest even once on writing (the blend
 * reads the old bf16 value). Maths: FMA for fp32 storage, tensor cores for bf16. What it cannot:
 * the real library's algorithms, workspace use or numerics. Each heuristic query offers one
 * algorithm needing EMU_DNN_WS bytes, and each call checks it was given that workspace. */
#ifndef ENDORET_EMU_CUDNN_H
#define ENDORET_EMU_CUDNN_H

#include "kernels/dtype.h"

static inline size_t cudnnGetVersion(void) { return 91900; }

struct cudnnContext {
    int unused;
};
typedef cudnnContext *cudnnHandle_t;
typedef enum { CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_BAD_PARAM = 3, CUDNN_STATUS_NOT_SUPPORTED = 9 } cudnnStatus_t;
typedef enum { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 } cudnnTensorFormat_t;
typedef enum { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_BFLOAT16 = 9 } cudnnDataType_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum { CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1, CUDNN_FMA_MATH = 3 } cudnnMathType_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;
typedef enum { CUDNN_BATCHNORM_PER_ACTIVATION = 0, CUDNN_BATCHNORM_SPATIAL = 1 } cudnnBatchNormMode_t;
typedef int cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t;
enum { CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6,
       CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT = 7 };
#define EMU_DNN_WS ((size_t)96) /* bytes each emulated algorithm asks for */

struct emu_tdesc {
    int n, c, h, w;
    cudnnTensorFormat_t fmt;
    cudnnDataType_t dt;
};
struct emu_cdesc {
    int ph, pw, sh, sw, dh, dw, groups, mode, math;
    cudnnDataType_t compute;
};
typedef emu_tdesc *cudnnTensorDescriptor_t;
typedef emu_tdesc *cudnnFilterDescriptor_t; /* k, c, r, s */
typedef emu_cdesc *cudnnConvolutionDescriptor_t;

template <class A> struct emu_perf {
    A algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t mathType;
    int reserved[3];
};
typedef emu_perf<cudnnConvolutionFwdAlgo_t> cudnnConvolutionFwdAlgoPerf_t;
typedef emu_perf<cudnnConvolutionBwdDataAlgo_t> cudnnConvolutionBwdDataAlgoPerf_t;
typedef emu_perf<cudnnConvolutionBwdFilterAlgo_t> cudnnConvolutionBwdFilterAlgoPerf_t;

static inline const char *cudnnGetErrorString(cudnnStatus_t s) { return s ? "emulated cuDNN error" : "success"; }
static inline cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    static cudnnContext ctx;
    *h = &ctx;
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnDestroy(cudnnHandle_t) { return CUDNN_STATUS_SUCCESS; }
static inline cudnnStatus_t cudnnSetStream(cudnnHandle_t, cudaStream_t) { return CUDNN_STATUS_SUCCESS; }
/* descriptors live for the process, as the backend's */
static inline cudnnStatus_t cudnnCreateTensorDescriptor(emu_tdesc **d) { static emu_tdesc pool[8]; static int k; *d = &pool[k++ % 8]; return CUDNN_STATUS_SUCCESS; }
static inline cudnnStatus_t cudnnCreateFilterDescriptor(emu_tdesc **d) { static emu_tdesc pool[4]; static int k; *d = &pool[k++ % 4]; return CUDNN_STATUS_SUCCESS; }
static inline cudnnStatus_t cudnnCreateConvolutionDescriptor(emu_cdesc **d) { static emu_cdesc pool[4]; static int k; *d = &pool[k++ % 4]; return CUDNN_STATUS_SUCCESS; }
static inline cudnnStatus_t cudnnSetTensor4dDescriptor(emu_tdesc *d, cudnnTensorFormat_t fmt, cudnnDataType_t dt, int n, int c, int h, int w) {
    if (n < 1 || c < 1 || h < 1 || w < 1 || (fmt != CUDNN_TENSOR_NCHW && fmt != CUDNN_TENSOR_NHWC) ||
        (dt != CUDNN_DATA_FLOAT && dt != CUDNN_DATA_BFLOAT16))
        return CUDNN_STATUS_BAD_PARAM;
    *d = emu_tdesc{n, c, h, w, fmt, dt};
    return CUDNN_STATUS_SUCCESS;
}
/* k, c, r, s; format NCHW: KCRS in memory, NHWC: KRSC */
static inline cudnnStatus_t cudnnSetFilter4dDescriptor(emu_tdesc *d, cudnnDataType_t dt, cudnnTensorFormat_t fmt, int k, int c, int r, int s) {
    return cudnnSetTensor4dDescriptor(d, fmt, dt, k, c, r, s);
}
static inline cudnnStatus_t cudnnSetConvolution2dDescriptor(emu_cdesc *d, int ph, int pw, int sh, int sw, int dh, int dw,
                                                            cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
    *d = emu_cdesc{ph, pw, sh, sw, dh, dw, 1, (int)mode, 0, compute};
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetConvolutionGroupCount(emu_cdesc *d, int g) { d->groups = g; return CUDNN_STATUS_SUCCESS; }
static inline cudnnStatus_t cudnnSetConvolutionMathType(emu_cdesc *d, cudnnMathType_t m) { d->math = m; return CUDNN_STATUS_SUCCESS; }

/* The geometry check cuDNN makes: y's dims are the convolution output of x and w. */
static inline bool emu_conv_ok(const emu_tdesc *x, const emu_tdesc *w, const emu_cdesc *c, const emu_tdesc *y) {
    int P = (x->h + 2 * c->ph - c->dh * (w->h - 1) - 1) / c->sh + 1;
    int Q = (x->w + 2 * c->pw - c->dw * (w->w - 1) - 1) / c->sw + 1;
    /* one storage type; fp32 accumulation; FMA maths for fp32 (no TF32), tensor cores for bf16 */
    bool types = x->dt == w->dt && y->dt == x->dt && c->compute == CUDNN_DATA_FLOAT &&
                 c->math == (x->dt == CUDNN_DATA_BFLOAT16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
    return types && x->fmt == y->fmt && c->mode == CUDNN_CROSS_CORRELATION && x->c == w->c * c->groups &&
           w->n % c->groups == 0 && y->n == x->n && y->c == w->n && y->h == P && y->w == Q;
}
/* The offset of element (n, c, h, w) (a filter's (k, c, r, s)) in d's format. */
static inline int64_t emu_at(const emu_tdesc *d, int n, int c, int h, int w) {
    return d->fmt == CUDNN_TENSOR_NHWC ? (((int64_t)n * d->h + h) * d->w + w) * d->c + c
                                        : (((int64_t)n * d->c + c) * d->h + h) * d->w + w;
}
/* element i of a tensor of d's type, widened */
static inline double emu_get(const emu_tdesc *d, const void *p, int64_t i) {
    return d->dt == CUDNN_DATA_BFLOAT16 ? er_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
/* the layout the batch norm, bias and add-tensor stand-ins read: NCHW fp32 */
static inline bool emu_plain(const emu_tdesc *d) { return d->fmt == CUDNN_TENSOR_NCHW && d->dt == CUDNN_DATA_FLOAT; }
template <class P> static inline cudnnStatus_t emu_heuristic(int *n, P *perf) {
    perf[0] = P{};
    perf[0].status = CUDNN_STATUS_SUCCESS;
    perf[0].memory = EMU_DNN_WS;
    perf[0].determinism = CUDNN_DETERMINISTIC;
    perf[0].mathType = CUDNN_FMA_MATH;
    *n = 1;
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, emu_tdesc *x, emu_tdesc *w, emu_cdesc *c, emu_tdesc *y,
                                                                   int, int *n, cudnnConvolutionFwdAlgoPerf_t *p) {
    return emu_conv_ok(x, w, c, y) ? emu_heuristic(n, p) : CUDNN_STATUS_BAD_PARAM;
}
static inline cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, emu_tdesc *w, emu_tdesc *y, emu_cdesc *c, emu_tdesc *x,
                                                                        int, int *n, cudnnConvolutionBwdDataAlgoPerf_t *p) {
    return emu_conv_ok(x, w, c, y) ? emu_heuristic(n, p) : CUDNN_STATUS_BAD_PARAM;
}
static inline cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t, emu_tdesc *x, emu_tdesc *y, emu_cdesc *c, emu_tdesc *w,
                                                                          int, int *n, cudnnConvolutionBwdFilterAlgoPerf_t *p) {
    return emu_conv_ok(x, w, c, y) ? emu_heuristic(n, p) : CUDNN_STATUS_BAD_PARAM;
}

/* Visits every (x element, w element, y element) triple of the convolution. */
template <class F> static inline void emu_conv_walk(const emu_tdesc *x, const emu_tdesc *w, const emu_cdesc *c, const emu_tdesc *y, F f) {
    int Cg = w->c, Kg = w->n / c->groups;
    for (int n = 0; n < y->n; n++)
        for (int k = 0; k < y->c; k++)
            for (int p = 0; p < y->h; p++)
                for (int q = 0; q < y->w; q++)
                    for (int ci = 0; ci < Cg; ci++)
                        for (int r = 0; r < w->h; r++)
                            for (int s = 0; s < w->w; s++) {
                                int ih = p * c->sh - c->ph + r * c->dh, iw = q * c->sw - c->pw + s * c->dw;
                                if (ih < 0 || ih >= x->h || iw < 0 || iw >= x->w) continue;
                                f(emu_at(x, n, k / Kg * Cg + ci, ih, iw), emu_at(w, k, ci, r, s), emu_at(y, n, k, p, q));
                            }
}
static inline int64_t emu_numel(const emu_tdesc *d) { return (int64_t)d->n * d->c * d->h * d->w; }
/* out = alpha acc + beta out (out of d's type: a bf16 one rounded once; beta 0: out not read) */
static inline void emu_blend(const emu_tdesc *d, void *out, const std::vector<double> &acc, const void *alpha, const void *beta) {
    float a = *(const float *)alpha, b = *(const float *)beta;
    for (size_t i = 0; i < acc.size(); i++) {
        float v = b == 0.0f ? (float)(a * acc[i]) : (float)(a * acc[i] + b * emu_get(d, out, (int64_t)i));
        if (d->dt == CUDNN_DATA_BFLOAT16) ((uint16_t *)out)[i] = er_f32_to_bf16(v);
        else ((float *)out)[i] = v;
    }
}
static inline cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t, const void *alpha, emu_tdesc *xd, const void *x, emu_tdesc *wd,
                                                    const void *w, emu_cdesc *cd, int, void *ws, size_t wsb, const void *beta,
                                                    emu_tdesc *yd, void *y) {
    if (!emu_conv_ok(xd, wd, cd, yd) || wsb != EMU_DNN_WS || !ws) return CUDNN_STATUS_BAD_PARAM;
    memset(ws, 0x7f, wsb); /* an undersized workspace shows under ASan */
    std::vector<double> acc(emu_numel(yd), 0.0);
    emu_conv_walk(xd, wd, cd, yd, [&](int64_t xi, int64_t wi, int64_t yi) { acc[yi] += emu_get(xd, x, xi) * emu_get(wd, w, wi); });
    emu_blend(yd, y, acc, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t, const void *alpha, emu_tdesc *wd, const void *w, emu_tdesc *yd,
                                                         const void *dy, emu_cdesc *cd, int, void *ws, size_t wsb, const void *beta,
                                                         emu_tdesc *xd, void *dx) {
    if (!emu_conv_ok(xd, wd, cd, yd) || wsb != EMU_DNN_WS || !ws) return CUDNN_STATUS_BAD_PARAM;
    memset(ws, 0x7f, wsb); /* an undersized workspace shows under ASan */
    std::vector<double> acc(emu_numel(xd), 0.0);
    emu_conv_walk(xd, wd, cd, yd, [&](int64_t xi, int64_t wi, int64_t yi) { acc[xi] += emu_get(yd, dy, yi) * emu_get(wd, w, wi); });
    emu_blend(xd, dx, acc, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t, const void *alpha, emu_tdesc *xd, const void *x, emu_tdesc *yd,
                                                           const void *dy, emu_cdesc *cd, int, void *ws, size_t wsb, const void *beta,
                                                           emu_tdesc *wd, void *dw) {
    if (!emu_conv_ok(xd, wd, cd, yd) || wsb != EMU_DNN_WS || !ws) return CUDNN_STATUS_BAD_PARAM;
    memset(ws, 0x7f, wsb); /* an undersized workspace shows under ASan */
    std::vector<double> acc(emu_numel(wd), 0.0);
    emu_conv_walk(xd, wd, cd, yd, [&](int64_t xi, int64_t wi, int64_t yi) { acc[wi] += emu_get(yd, dy, yi) * emu_get(xd, x, xi); });
    emu_blend(wd, dw, acc, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}
/* per-channel sums over (n, h, w) of a 4-d tensor */
static inline std::vector<double> emu_channel_sum(const emu_tdesc *d, const float *v) {
    std::vector<double> s(d->c, 0.0);
    int64_t hw = (int64_t)d->h * d->w;
    for (int64_t i = 0; i < emu_numel(d); i++) s[i / hw % d->c] += v[i];
    return s;
}
static inline cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t, const void *alpha, emu_tdesc *yd, const void *dy, const void *beta,
                                                         emu_tdesc *bd, void *db) {
    if (!emu_plain(bd) || !emu_plain(yd) || bd->n != 1 || bd->c != yd->c || bd->h != 1 || bd->w != 1) return CUDNN_STATUS_BAD_PARAM;
    emu_blend(bd, db, emu_channel_sum(yd, (const float *)dy), alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}
/* y = alpha b (broadcast over a 1 x C x 1 x 1 descriptor) + beta y */
static inline cudnnStatus_t cudnnAddTensor(cudnnHandle_t, const void *alpha, emu_tdesc *bd, const void *b, const void *beta, emu_tdesc *yd, void *y) {
    if (!emu_plain(bd) || !emu_plain(yd) || bd->n != 1 || bd->c != yd->c || bd->h != 1 || bd->w != 1) return CUDNN_STATUS_BAD_PARAM;
    std::vector<double> acc(emu_numel(yd));
    int64_t hw = (int64_t)yd->h * yd->w;
    for (int64_t i = 0; i < (int64_t)acc.size(); i++) acc[i] = ((const float *)b)[i / hw % yd->c];
    emu_blend(yd, y, acc, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}

/* ---- batch norm, spatial mode ---- */
static inline cudnnStatus_t cudnnBatchNormalizationForwardTraining(cudnnHandle_t, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
                                                                   emu_tdesc *xd, const void *xv, emu_tdesc *yd, void *yv, emu_tdesc *bd,
                                                                   const void *scale, const void *bias, double factor, void *rmean,
                                                                   void *rvar, double eps, void *smean, void *sinv) {
    if (mode != CUDNN_BATCHNORM_SPATIAL || !emu_plain(xd) || !emu_plain(yd) || !emu_plain(bd) || bd->c != xd->c ||
        emu_numel(bd) != bd->c || emu_numel(yd) != emu_numel(xd) || (!rmean) != (!rvar))
        return CUDNN_STATUS_BAD_PARAM;
    const float *x = (const float *)xv, *w = (const float *)scale, *b = (const float *)bias;
    int64_t hw = (int64_t)xd->h * xd->w, M = (int64_t)xd->n * hw, n = emu_numel(xd);
    std::vector<double> mean = emu_channel_sum(xd, x), var(xd->c, 0.0), acc(n);
    for (auto &m : mean) m /= (double)M;
    for (int64_t i = 0; i < n; i++) var[i / hw % xd->c] += (x[i] - mean[i / hw % xd->c]) * (x[i] - mean[i / hw % xd->c]);
    for (int c = 0; c < xd->c; c++) {
        double v = var[c] / (double)M, inv = 1.0 / sqrt(v + eps);
        if (rmean) { /* unbiased running variance: torch's cuDNN batch norm relies on cuDNN doing this */
            ((float *)rmean)[c] = (float)((1 - factor) * ((float *)rmean)[c] + factor * mean[c]);
            ((float *)rvar)[c] = (float)((1 - factor) * ((float *)rvar)[c] + factor * var[c] / (double)(M - 1));
        }
        if (smean) ((float *)smean)[c] = (float)mean[c];
        if (sinv) ((float *)sinv)[c] = (float)inv;
        var[c] = inv;
    }
    for (int64_t i = 0; i < n; i++) {
        int c = (int)(i / hw % xd->c);
        acc[i] = (x[i] - mean[c]) * var[c] * w[c] + b[c];
    }
    emu_blend(yd, yv, acc, alpha, beta);
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnBatchNormalizationBackward(cudnnHandle_t, cudnnBatchNormMode_t mode, const void *alphaD, const void *betaD,
                                                            const void *alphaP, const void *betaP, emu_tdesc *xd, const void *xv,
                                                            emu_tdesc *dyd, const void *dyv, emu_tdesc *dxd, void *dxv, emu_tdesc *bd,
                                                            const void *scale, void *dscale, void *dbias, double eps,
                                                            const void *smean, const void *sinv) {
    if (mode != CUDNN_BATCHNORM_SPATIAL || !smean || !sinv || !emu_plain(xd) || !emu_plain(dyd) || !emu_plain(dxd) ||
        !emu_plain(bd) || bd->c != xd->c || emu_numel(dyd) != emu_numel(xd) || emu_numel(dxd) != emu_numel(xd))
        return CUDNN_STATUS_BAD_PARAM;
    const float *x = (const float *)xv, *dy = (const float *)dyv, *w = (const float *)scale;
    const float *mean = (const float *)smean, *inv = (const float *)sinv;
    int64_t hw = (int64_t)xd->h * xd->w, M = (int64_t)xd->n * hw, n = emu_numel(xd);
    std::vector<double> sg(xd->c, 0.0), sgx(xd->c, 0.0), dx(n);
    for (int64_t i = 0; i < n; i++) {
        int c = (int)(i / hw % xd->c);
        sg[c] += dy[i];
        sgx[c] += (double)dy[i] * (x[i] - mean[c]) * inv[c];
    }
    for (int64_t i = 0; i < n; i++) {
        int c = (int)(i / hw % xd->c);
        double xh = (x[i] - mean[c]) * (double)inv[c];
        dx[i] = w[c] * (double)inv[c] * (dy[i] - sg[c] / M - xh * sgx[c] / M);
    }
    emu_blend(dxd, dxv, dx, alphaD, betaD);
    emu_blend(bd, dscale, sgx, alphaP, betaP);
    emu_blend(bd, dbias, sg, alphaP, betaP);
    return CUDNN_STATUS_SUCCESS;
}

#endif
