/* attention_gemm.h — the cuBLAS path of cu_attention / cu_attention_backward (attention_gemm.cu);
 * internal to kernels/cuda. */
#ifndef ENDORET_ATTENTION_GEMM_H
#define ENDORET_ATTENTION_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* Whether this shape's scores fit the GEMM path's budget (attention.cu's chooser decides). */
bool cu_attention_gemm_fits(int B, int H, int Tq, int Tk);
/* Floats of workspace the GEMM path needs (forward and backward alike). */
size_t cu_attention_gemm_workspace(int B, int H, int Tq, int Tk);
void cu_attention_gemm_fwd(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                           const float *k, const int64_t *ks, const float *v, const int64_t *vs, int mask_kind,
                           const float *mask, const int64_t *ms, float *o, const int64_t *os, float *lse,
                           float *work);
void cu_attention_gemm_bwd(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                           const float *k, const int64_t *ks, const float *v, const int64_t *vs, int mask_kind,
                           const float *mask, const int64_t *ms, const float *go, const int64_t *gos,
                           const float *lse, float *gq, const int64_t *gqs, float *gk, const int64_t *gks,
                           float *gv, const int64_t *gvs, float *work);

#endif
