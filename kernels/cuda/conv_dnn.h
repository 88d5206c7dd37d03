/* conv_dnn.h — the cuDNN convolution plumbing shared by conv.cu (NCHW fp32) and conv_nhwc.cu
 * (channels-last, fp32 or bf16 storage): the error check, one set of descriptors set per call, and
 * the algorithm choice cached per shape, layout, storage type and maths (defined in conv.cu). */
#ifndef ENDORET_CONV_DNN_H
#define ENDORET_CONV_DNN_H

#include <cudnn.h>

#include "kernels/conv_args.h"

bool dnn_ok(cudnnStatus_t st, const char *what, int line);
#define DNN(call) dnn_ok((call), #call, __LINE__)

/* What a convolution's descriptors and algorithms depend on: the geometry (with its `compute`),
 * the storage type (ER_F32 / ER_BF16) and the layout (0 NCHW + KCRS filter, 1 NHWC + KRSC). Ints
 * only, so memcmp compares it field by field. */
struct conv_key {
    conv2d_args a;
    int dt, nhwc;
};

struct conv_dnn {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

/* The handle with d's x, y, w and conv descriptors set for k (NULL, error recorded, if cuDNN fails). */
cudnnHandle_t conv_set_descs(const conv_key *k, conv_dnn *d);

/* The cached algorithm of each pass for k (descriptors set by conv_set_descs); backward ones
 * deterministic. False (error recorded) when cuDNN offers none. */
bool conv_fwd_algo(cudnnHandle_t h, const conv_key *k, const conv_dnn *d, cudnnConvolutionFwdAlgoPerf_t *p);
bool conv_bwd_data_algo(cudnnHandle_t h, const conv_key *k, const conv_dnn *d, cudnnConvolutionBwdDataAlgoPerf_t *p);
bool conv_bwd_filter_algo(cudnnHandle_t h, const conv_key *k, const conv_dnn *d, cudnnConvolutionBwdFilterAlgoPerf_t *p);

/* bytes as whole floats (the op table's workspaces count floats) */
static inline size_t dnn_floats(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

#endif
