/* conv_nhwc.cu — channels-last convolution through cuDNN (x [N, H, W, C], y [N, P, Q, K], fp32 or
 * bf16 storage), mirroring kernels/cpu/conv_nhwc.c. The op table's weights are the fp32 master
 * copy [K, C/groups, R, S]; cuDNN's NHWC filter is KRSC in the storage type, so each call first
 * writes that copy into `work` (bf16 rounded with cast.cu's integer rounding, the bits of
 * kernels/dtype.h, so the two backends round alike). Backward filter: cuDNN writes dw (KRSC, the
 * storage type) into `work` with beta 0, then k_dw_add adds it, transposed and widened, to the
 * fp32 gw. Backward data: cuDNN's beta blend is the accumulation (in bf16 storage it reads the old
 * value and rounds old + new once). Descriptors, maths and the cached algorithm choice:
 * conv_dnn.h, shared with conv.cu (bf16 storage runs on tensor cores, fp32 products accumulate in
 * fp32: the convolution's compute type is always FLOAT). */
#include <cudnn.h>

#include "kernels/cuda/conv_dnn.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define NHWC_THREADS 256

static conv_dnn g_nhwc; /* this file's descriptors, made on first use */

static int64_t filter_numel(const conv2d_args *a) { return (int64_t)a->K * (a->C / a->groups) * a->R * a->S; }

/* floats holding one filter of type dt, rounded up to 64 (256 bytes: what follows stays aligned) */
static size_t filter_floats(const conv2d_args *a, int dt) {
    size_t f = dnn_floats((size_t)filter_numel(a) * er_dtype_size(dt));
    return (f + 63) / 64 * 64;
}

/* wt [K, RS, Cg] of type dt = w [K, Cg, RS] (fp32), each element rounded once */
__global__ void k_w_to_krsc(int64_t n, int Cg, int RS, const float *w, int dt, void *wt) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i % Cg, rs = i / Cg % RS, k = i / ((int64_t)Cg * RS);
        cu_store_f32(dt, wt, i, w[(k * Cg + c) * RS + rs]);
    }
}

/* gw [K, Cg, RS] += widen(dw [K, RS, Cg] of type dt) */
__global__ void k_dw_add(int64_t n, int Cg, int RS, int dt, const void *dw, float *gw) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rs = i % RS, c = i / RS % Cg, k = i / ((int64_t)Cg * RS);
        gw[i] += cu_load_f32(dt, dw, (k * RS + rs) * Cg + c);
    }
}

/* The handle with this file's descriptors set for (a, dt), and the key of its cached algorithms. */
static cudnnHandle_t nhwc_descs(const conv2d_args *a, int dt, conv_key *k) {
    *k = conv_key{*a, dt, 1};
    return conv_set_descs(k, &g_nhwc);
}

/* w in cuDNN's layout and type: work's first filter_floats(a, dt) floats */
static bool weights_krsc(const conv2d_args *a, int dt, const float *w, float *work) {
    const int64_t n = filter_numel(a);
    k_w_to_krsc<<<cuda_blocks(n, NHWC_THREADS), NHWC_THREADS, 0, cuda_stream()>>>(n, a->C / a->groups, a->R * a->S, w,
                                                                                  dt, work);
    return !CUDA_LAUNCHED("conv2d_nhwc weights");
}

/* work: the KRSC weights, then cuDNN's workspace */
size_t cu_conv2d_nhwc_workspace(const conv2d_args *a, int dt) {
    conv_key k;
    cudnnHandle_t h = nhwc_descs(a, dt, &k);
    cudnnConvolutionFwdAlgoPerf_t p;
    return h && conv_fwd_algo(h, &k, &g_nhwc, &p) ? filter_floats(a, dt) + dnn_floats(p.memory) : 0;
}

void cu_conv2d_nhwc(const conv2d_args *a, int dt, const void *x, const float *w, void *y, float *work) {
    conv_key k;
    cudnnHandle_t h = nhwc_descs(a, dt, &k);
    cudnnConvolutionFwdAlgoPerf_t p;
    if (!h || !conv_fwd_algo(h, &k, &g_nhwc, &p) || !weights_krsc(a, dt, w, work)) return;
    const float one = 1.0f, zero = 0.0f;
    DNN(cudnnConvolutionForward(h, &one, g_nhwc.x, x, g_nhwc.w, work, g_nhwc.conv, p.algo, work + filter_floats(a, dt),
                                p.memory, &zero, g_nhwc.y, y));
}

/* work: the KRSC weights, the KRSC filter gradient, then the larger of the two passes' cuDNN
 * workspaces (the call may run either or both) */
size_t cu_conv2d_nhwc_backward_workspace(const conv2d_args *a, int dt) {
    conv_key k;
    cudnnHandle_t h = nhwc_descs(a, dt, &k);
    cudnnConvolutionBwdDataAlgoPerf_t pd;
    cudnnConvolutionBwdFilterAlgoPerf_t pf;
    if (!h || !conv_bwd_data_algo(h, &k, &g_nhwc, &pd) || !conv_bwd_filter_algo(h, &k, &g_nhwc, &pf)) return 0;
    return 2 * filter_floats(a, dt) + dnn_floats(pd.memory > pf.memory ? pd.memory : pf.memory);
}

void cu_conv2d_nhwc_backward(const conv2d_args *a, int dt, const void *x, const float *w, const void *gy, void *gx,
                             float *gw, float *work, int gx_acc) {
    conv_key k;
    cudnnHandle_t h = nhwc_descs(a, dt, &k);
    if (!h) return;
    const size_t ff = filter_floats(a, dt);
    float *dw = work + ff, *ws = work + 2 * ff;
    /* gx's beta 0 (a fresh buffer) writes it without reading; dw is scratch, written */
    const float one = 1.0f, zero = 0.0f;
    if (gx) {
        cudnnConvolutionBwdDataAlgoPerf_t p;
        if (conv_bwd_data_algo(h, &k, &g_nhwc, &p) && weights_krsc(a, dt, w, work))
            DNN(cudnnConvolutionBackwardData(h, &one, g_nhwc.w, work, g_nhwc.y, gy, g_nhwc.conv, p.algo, ws, p.memory,
                                             gx_acc ? &one : &zero, g_nhwc.x, gx));
    }
    if (gw) {
        cudnnConvolutionBwdFilterAlgoPerf_t p;
        if (!conv_bwd_filter_algo(h, &k, &g_nhwc, &p) ||
            !DNN(cudnnConvolutionBackwardFilter(h, &one, g_nhwc.x, x, g_nhwc.y, gy, g_nhwc.conv, p.algo, ws, p.memory,
                                                &zero, g_nhwc.w, dw)))
            return;
        const int64_t n = filter_numel(a);
        k_dw_add<<<cuda_blocks(n, NHWC_THREADS), NHWC_THREADS, 0, cuda_stream()>>>(n, a->C / a->groups, a->R * a->S, dt,
                                                                                   dw, gw);
        CUDA_LAUNCHED("conv2d_nhwc_backward filter gradient");
    }
}
