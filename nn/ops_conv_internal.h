/* ops_conv_internal.h — the checks the NCHW image ops (ops_conv.c) and their channels-last forms
 * (ops_conv_nhwc.c) share, so both give the same message for the same mistake (internal). */
#ifndef ENDORET_OPS_CONV_INTERNAL_H
#define ENDORET_OPS_CONV_INTERNAL_H

#include "kernels/conv_args.h"
#include "nn/tensor.h"

/* The geometry of a convolution of x (sizes nchw = N, C, H, W whatever x's layout, named by `layout`
 * in messages) by w [K, C / groups, R, S] (+ bias [K]), in host arena memory for the tape; NULL
 * (er_fail naming op) when the shapes, stride, padding or dilation do not fit. */
conv2d_args *ops_conv2d_args(const char *op, const tensor *x, const char *layout, const int64_t nchw[4],
                             const tensor *w, const tensor *bias, const int stride[2], const int pad[2],
                             const int dilation[2], int groups, int compute);
/* 1 when batch norm's vectors, running statistics, mode and constants fit x's C channels of M values
 * each; 0 after er_fail naming op. */
int ops_bn_check(const char *op, const tensor *x, int64_t C, int64_t M, const tensor *w, const tensor *b,
                 const tensor *rm, const tensor *rv, int training, float momentum, float eps);
/* What a batch norm's backward needs from its forward (both layouts; in the tape node's ctx). */
typedef struct {
    const float *w;  /* the weight, or ones when the op has none */
    float *stats;    /* mean [C], rstd [C] as the forward used them */
    float eps;
    int training;
    int relu;        /* the output is max(., 0): the backward masks gy by output > 0 */
} ops_bn_ctx;
/* The weight and bias pointers a kernel gets: w's and b's, or ones / zeros in arena scratch when the
 * op has none (affine off). */
void ops_bn_affine(const tensor *x, int64_t C, const tensor *w, const tensor *b, const float **wd, const float **bd);
/* Max pooling's geometry (kernel x kernel windows, stride 0 = kernel) in *a; 0 after er_fail naming op. */
int ops_pool2d_args(const char *op, const tensor *x, const int64_t nchw[4], int kernel, int stride, int pad,
                    pool2d_args *a);

#endif
