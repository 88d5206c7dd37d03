/* cuda_kernels.h — the CUDA kernels that fill backend_cuda() (kernels/backend.h documents each
 * one; the CPU function each mirrors is named in its .cu file). Internal to kernels/cuda. */
#ifndef ENDORET_CUDA_KERNELS_H
#define ENDORET_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* elementwise.cu */
void cu_fill(float *y, int64_t n, float v);
void cu_copy_strided(int ndim, const int64_t *shape, const float *x, const int64_t *xs, float *y,
                     const int64_t *ys, int accumulate);
void cu_sum_to(int ndim, const int64_t *xshape, const float *x, const int64_t *yshape, float *y,
               int accumulate);
void cu_binary(int op, int ndim, const int64_t *shape, const float *a, const int64_t *as,
               const float *b, const int64_t *bs, float *y);
void cu_binary_grad(int op, int side, int ndim, const int64_t *shape, const float *a,
                    const int64_t *as, const float *b, const int64_t *bs, const float *gy, float *g,
                    int accumulate);
void cu_unary(int op, int64_t n, const float *x, float *y, float alpha, float beta);
void cu_unary_backward(int op, int64_t n, const float *x, const float *y, const float *gy, float *gx,
                       float alpha, float beta);
void cu_dropout(int64_t n, const float *x, float *y, float p, uint64_t seed, uint64_t stream,
                uint64_t offset, int accumulate);

/* reduce.cu */
void cu_reduce(int op, int64_t outer, int64_t len, int64_t inner, const float *x, float *y,
               int32_t *argmax);
void cu_reduce_backward(int op, int64_t outer, int64_t len, int64_t inner, const float *gy,
                        const int32_t *argmax, float *gx);

/* gemm.cu */
void cu_gemm_batched(int transA, int transB, int m, int n, int k, float alpha, const float *A,
                     int lda, long strideA, const float *B, int ldb, long strideB, float beta,
                     float *C, int ldc, long strideC, int batch);

/* norm.cu */
void cu_layernorm(int64_t rows, int64_t cols, const float *x, const float *w, const float *b,
                  float eps, float *y, float *mean, float *rstd);
void cu_layernorm_backward(int64_t rows, int64_t cols, const float *x, const float *w,
                           const float *mean, const float *rstd, const float *gy, float *gx,
                           float *gw, float *gb);
void cu_softmax(int64_t rows, int64_t cols, const float *x, float *y, int log);
void cu_softmax_backward(int64_t rows, int64_t cols, const float *y, const float *gy, float *gx,
                         int log);
void cu_l2norm(int64_t rows, int64_t cols, const float *x, float *y, float *norm, float eps);
void cu_l2norm_backward(int64_t rows, int64_t cols, const float *y, const float *norm,
                        const float *gy, float *gx, float eps);
void cu_cross_entropy(int64_t rows, int64_t cols, const float *x, const int32_t *label, float *loss,
                      float *lse);
void cu_cross_entropy_backward(int64_t rows, int64_t cols, const float *x, const int32_t *label,
                               const float *lse, float scale, float *gx);

/* index.cu */
void cu_gather(int64_t outer, int64_t L, int64_t inner, const float *x, const int32_t *idx,
               int64_t idx_stride, int64_t K, float *y);
void cu_scatter_add(int64_t outer, int64_t K, int64_t inner, const float *x, const int32_t *idx,
                    int64_t idx_stride, int64_t L, float *y);

/* attention.cu */
size_t cu_attention_workspace(int B, int H, int Tq, int Tk, int D);
void cu_attention(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                  const float *k, const int64_t *ks, const float *v, const int64_t *vs,
                  int mask_kind, const float *mask, const int64_t *ms, float *o, const int64_t *os,
                  float *lse, float *work);
void cu_attention_backward(int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                           const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                           const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                           const float *o, const int64_t *os, const float *go, const int64_t *gos,
                           const float *lse, float *gq, const int64_t *gqs, float *gk,
                           const int64_t *gks, float *gv, const int64_t *gvs, float *work);

#endif
