/* attention_mma.h — the tensor-core path of cu_attention / cu_attention_backward for short
 * sequences (attention_mma.cu); internal to kernels/cuda. */
#ifndef ENDORET_ATTENTION_MMA_H
#define ENDORET_ATTENTION_MMA_H

#include <stddef.h>
#include <stdint.h>

/* Whether this call can take the tensor-core path: bf16 mode, no mask, head dim a multiple of 16 up
 * to 64, at most 256 queries and keys; unless `pinned` (ENDORET_CUDA_ATTENTION=mma or flash), only the
 * shapes where it measured faster than cuBLAS. attention.cu's chooser decides. */
bool cu_attention_mma_fits(int compute, int B, int H, int Tq, int Tk, int D, int mask_kind, bool pinned);
/* Floats of workspace (the wmma backward's bf16 P and dS, B*H*Tq16*Tk16 each; the forward and the
 * flash kernels need none). */
size_t cu_attention_mma_workspace(int B, int H, int Tq, int Tk, bool flash);
/* false when not taken (rows not 16-byte aligned): the caller runs another path. flash: the kernels
 * with S, P and dS in registers (mma.sync, attention_flash.cu; ENDORET_CUDA_ATTENTION=flash) instead
 * of the wmma ones. The backward's accumulate = false writes the gradients without reading them (what
 * adding into zeros gives, bit for bit). */
bool cu_attention_mma_fwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                          const float *k, const int64_t *ks, const float *v, const int64_t *vs, float *o,
                          const int64_t *os, float *lse, bool flash);
bool cu_attention_mma_bwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                          const float *k, const int64_t *ks, const float *v, const int64_t *vs, const float *o,
                          const int64_t *os, const float *go, const int64_t *gos, const float *lse, float *gq,
                          const int64_t *gqs, float *gk, const int64_t *gks, float *gv, const int64_t *gvs,
                          float *work, bool flash, bool accumulate);
/* The same on bf16 storage (q, k, v, o, dO and the gradients as bf16 bits; rows 8-byte aligned, strides
 * multiples of 4): bit for bit the fp32 kernels on widened copies, o rounded once, and each gradient
 * added as round(old + new) (cu_attention_bf16 in attention.cu). */
bool cu_attention_mma_fwd_bf16(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                               const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs, uint16_t *o,
                               const int64_t *os, float *lse, bool flash);
bool cu_attention_mma_bwd_bf16(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                               const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs,
                               const uint16_t *o, const int64_t *os, const uint16_t *go, const int64_t *gos,
                               const float *lse, uint16_t *gq, const int64_t *gqs, uint16_t *gk, const int64_t *gks,
                               uint16_t *gv, const int64_t *gvs, float *work, bool flash, bool accumulate);

/* The path cu_attention takes for this call with aligned rows ("mma", "gemm" or "fused"), as its
 * chooser decides: for `bench cuda --probe`. attention.cu. */
const char *cu_attention_path(int compute, int B, int H, int Tq, int Tk, int D, int mask_kind);

#endif
