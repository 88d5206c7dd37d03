/* attention_gemm.cu — attention as batched cuBLAS products around one softmax kernel, the path
 * cu_attention / cu_attention_backward take while the score matrices fit their budget
 * (AT_GEMM_MAX_FLOATS). The fused kernels of attention.cu compute every product on the CUDA cores
 * in fp32 (measured on an H100: 4.5 TFLOP/s, bench/RESULTS_cuda.md); here the four products of a
 * head run on the tensor cores (in bf16 mode, CUBLAS_COMPUTE_32F_FAST_16BF like every other GEMM)
 * and only the softmax and its backward touch the B*H*Tq*Tk scores in memory.
 *
 *   forward:  S = scale Q K^T (+ mask);  P = softmax(S), lse = logsumexp(S);  O = P V
 *   backward: S again, P = exp(S - lse);  dP = dO V^T;  dS = P (dP - rowsum(P dP))
 *             dV += P^T dO;  dQ += scale dS K;  dK += scale dS^T Q
 * rowsum(P dP) = <dO_i, O_i> = the fused kernels' delta, summed over the keys instead of the head
 * dims. A row whose scores are all -inf gets O = 0 and lse = +inf, and no gradient, as on the CPU.
 *
 * (b, h) heads sit at b*stride_b + h*stride_h in each tensor (packed qkv included), which one
 * batch stride cannot express: the products are cublasGemmBatchedEx over pointer arrays that one
 * small kernel writes into the workspace.
 *
 * Workspace (floats, 8-byte aligned by the arena): AT_PTRS pointer arrays of B*H entries, then
 * S/P and dP, B*H*Tq*Tk each. */
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_gemm.h"
#include "kernels/cuda/cuda_common.h"

enum { P_Q, P_K, P_V, P_O, P_S, P_DP, P_GO, P_GQ, P_GK, P_GV, AT_PTRS };

/* The score budget: 2 B*H*Tq*Tk floats at most (2 GiB); above it the fused kernels run. */
#define AT_GEMM_MAX_FLOATS ((int64_t)1 << 29)

bool cu_attention_gemm_fits(int B, int H, int Tq, int Tk) {
    return B <= 65535 && 2 * (int64_t)B * H * Tq * Tk <= AT_GEMM_MAX_FLOATS; /* B: the softmax grid's y */
}

size_t cu_attention_gemm_workspace(int B, int H, int Tq, int Tk) {
    return (size_t)AT_PTRS * B * H * 2 + 2 * (size_t)B * H * Tq * Tk;
}

struct at_bases {
    const float *p[AT_PTRS];
    int64_t sb[AT_PTRS], sh[AT_PTRS];
};

/* ptrs[a * BH + b*H + h] = base_a + b sb_a + h sh_a (NULL bases stay NULL: that gradient is off) */
__global__ void k_at_pointers(int B, int H, at_bases t, const float **ptrs) {
    int64_t BH = (int64_t)B * H;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < AT_PTRS * BH; i += (int64_t)gridDim.x * blockDim.x) {
        int a = (int)(i / BH);
        int64_t bh = i % BH, b = bh / H, h = bh % H;
        ptrs[i] = t.p[a] ? t.p[a] + b * t.sb[a] + h * t.sh[a] : NULL;
    }
}

/* Row-major C[m,n] = alpha op(A) op(B) + beta C for every head, over pointer arrays (the column-
 * major call swaps A and B, as cu_gemm_batched). */
static void at_gemm(int compute, int ta, int tb, int m, int n, int k, float alpha, const float *const *A, int lda,
                    const float *const *Bm, int ldb, float beta, float *const *C, int ldc, int batch) {
    cublasComputeType_t ct = compute == GEMM_COMPUTE_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    cublasStatus_t st = cublasGemmBatchedEx(cuda_cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            n, m, k, &alpha, (const void *const *)Bm, CUDA_R_32F, ldb,
                                            (const void *const *)A, CUDA_R_32F, lda, &beta, (void *const *)C,
                                            CUDA_R_32F, ldc, batch, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char msg[200];
        snprintf(msg, sizeof msg, "attention: cublasGemmBatchedEx(m=%d n=%d k=%d batch=%d): %s", m, n, k, batch,
                 cublasGetStatusString(st));
        cuda_record_msg(msg, __FILE__, __LINE__);
    }
}

__device__ __forceinline__ float at_mask_add(int kind, const float *mask, const int64_t *ms, int64_t b, int64_t h,
                                             int64_t i, int64_t j) {
    if (kind == MASK_NONE) return 0.0f;
    float mv = mask[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]];
    if (kind == MASK_ADD) return mv;
    return mv == 0.0f ? -INFINITY : 0.0f;
}

struct at_mask_t {
    int kind;
    const float *mask;
    int64_t s[4];
};

/* One warp per score row (bh, i). Forward (lse_in NULL): S += mask, P = softmax, lse written.
 * Backward (lse_in given): P = exp(S + mask - lse) in S; with dP given, dP becomes dS. */
__global__ void k_at_softmax(int H, int Tq, int Tk, at_mask_t mk, float *S, float *lse_out, const float *lse_in,
                             float *dP) {
    /* grid: (rows of one image / warps per block, B); r = h * Tq + i within image b */
    int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), b = blockIdx.y;
    int lane = threadIdx.x & 31;
    if (r >= (int64_t)H * Tq) return;
    int64_t h = r / Tq, i = r % Tq, bh = b * H + h;
    float *s = S + (bh * Tq + i) * Tk;
    if (!lse_in) {
        float m = -INFINITY;
        for (int j = lane; j < Tk; j += 32) {
            float v = s[j] + at_mask_add(mk.kind, mk.mask, mk.s, b, h, i, j);
            s[j] = v;
            m = fmaxf(m, v);
        }
        m = cu_warp_max(m);
        if (m == -INFINITY) { /* every key masked: o = 0, lse = +inf */
            for (int j = lane; j < Tk; j += 32) s[j] = 0.0f;
            if (lane == 0) lse_out[bh * Tq + i] = INFINITY;
            return;
        }
        float l = 0.0f;
        for (int j = lane; j < Tk; j += 32) {
            float p = expf(s[j] - m);
            s[j] = p;
            l += p;
        }
        l = cu_warp_sum(l);
        float inv = 1.0f / l;
        for (int j = lane; j < Tk; j += 32) s[j] *= inv;
        if (lane == 0) lse_out[bh * Tq + i] = m + logf(l);
        return;
    }
    float L = lse_in[bh * Tq + i];
    float dot = 0.0f;
    for (int j = lane; j < Tk; j += 32) {
        float v = s[j] + at_mask_add(mk.kind, mk.mask, mk.s, b, h, i, j);
        float p = (L == INFINITY || v == -INFINITY) ? 0.0f : expf(v - L);
        s[j] = p;
        if (dP) dot += p * dP[(bh * Tq + i) * Tk + j];
    }
    if (!dP) return;
    dot = cu_warp_sum(dot);
    float *d = dP + (bh * Tq + i) * Tk;
    for (int j = lane; j < Tk; j += 32) d[j] = s[j] * (d[j] - dot);
}

static float **at_ptrs(float *work, int a, int64_t BH) { return (float **)work + a * BH; }

static void at_fill(int B, int H, const at_bases &t, float *work) {
    int64_t n = AT_PTRS * (int64_t)B * H;
    k_at_pointers<<<cuda_blocks(n, 256), 256, 0, cuda_stream()>>>(B, H, t, (const float **)work);
    CUDA_LAUNCHED("attention pointers");
}

static void at_base(at_bases &t, int a, const float *p, const int64_t *st) {
    t.p[a] = p;
    t.sb[a] = p ? st[0] : 0;
    t.sh[a] = p ? st[1] : 0;
}

static void at_scores(int B, int H, int Tq, int Tk, float **S_out, float **dP_out, float *work, at_bases &t) {
    int64_t BH = (int64_t)B * H, TT = (int64_t)Tq * Tk;
    float *S = work + AT_PTRS * BH * 2, *dP = S + BH * TT;
    const int64_t sS[2] = {H * TT, TT};
    at_base(t, P_S, S, sS);
    at_base(t, P_DP, dP, sS);
    *S_out = S;
    *dP_out = dP;
}

static at_mask_t at_mask_of(int kind, const float *mask, const int64_t *ms) {
    at_mask_t m = {kind, mask, {0, 0, 0, 0}};
    if (kind != MASK_NONE)
        for (int i = 0; i < 4; i++) m.s[i] = ms[i];
    return m;
}

static void at_softmax(int B, int H, int Tq, int Tk, at_mask_t mk, float *S, float *lse_out, const float *lse_in,
                       float *dP) {
    const int warps = 8;
    dim3 grid((unsigned)(((int64_t)H * Tq + warps - 1) / warps), (unsigned)B);
    k_at_softmax<<<grid, warps * 32, 0, cuda_stream()>>>(H, Tq, Tk, mk, S, lse_out, lse_in, dP);
    CUDA_LAUNCHED("attention softmax");
}

/* The bases both passes share: q, k, v and the score buffers S and dP in the workspace. */
static at_bases at_setup(int B, int H, int Tq, int Tk, const float *q, const int64_t *qs, const float *k,
                         const int64_t *ks, const float *v, const int64_t *vs, float **S, float **dP, float *work) {
    at_bases t = {};
    at_scores(B, H, Tq, Tk, S, dP, work, t);
    at_base(t, P_Q, q, qs);
    at_base(t, P_K, k, ks);
    at_base(t, P_V, v, vs);
    return t;
}

void cu_attention_gemm_fwd(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                           const float *k, const int64_t *ks, const float *v, const int64_t *vs, int mask_kind,
                           const float *mask, const int64_t *ms, float *o, const int64_t *os, float *lse,
                           float *work) {
    int64_t BH = (int64_t)B * H;
    float *S, *dP;
    at_bases t = at_setup(B, H, Tq, Tk, q, qs, k, ks, v, vs, &S, &dP, work);
    at_base(t, P_O, o, os);
    at_fill(B, H, t, work);
    at_gemm(compute, 0, 1, Tq, Tk, D, scale, at_ptrs(work, P_Q, BH), (int)qs[2], at_ptrs(work, P_K, BH), (int)ks[2], 0.0f,
            at_ptrs(work, P_S, BH), Tk, (int)BH);
    at_softmax(B, H, Tq, Tk, at_mask_of(mask_kind, mask, ms), S, lse, NULL, NULL);
    at_gemm(compute, 0, 0, Tq, D, Tk, 1.0f, at_ptrs(work, P_S, BH), Tk, at_ptrs(work, P_V, BH), (int)vs[2], 0.0f,
            at_ptrs(work, P_O, BH), (int)os[2], (int)BH);
}

void cu_attention_gemm_bwd(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                           const float *k, const int64_t *ks, const float *v, const int64_t *vs, int mask_kind,
                           const float *mask, const int64_t *ms, const float *go, const int64_t *gos,
                           const float *lse, float *gq, const int64_t *gqs, float *gk, const int64_t *gks,
                           float *gv, const int64_t *gvs, float *work) {
    int64_t BH = (int64_t)B * H;
    float *S, *dP;
    at_bases t = at_setup(B, H, Tq, Tk, q, qs, k, ks, v, vs, &S, &dP, work);
    at_base(t, P_GO, go, gos);
    at_base(t, P_GQ, gq, gqs);
    at_base(t, P_GK, gk, gks);
    at_base(t, P_GV, gv, gvs);
    at_fill(B, H, t, work);
    at_gemm(compute, 0, 1, Tq, Tk, D, scale, at_ptrs(work, P_Q, BH), (int)qs[2], at_ptrs(work, P_K, BH), (int)ks[2], 0.0f,
            at_ptrs(work, P_S, BH), Tk, (int)BH);
    const bool want_ds = gq || gk;
    if (want_ds) /* dP = dO V^T */
        at_gemm(compute, 0, 1, Tq, Tk, D, 1.0f, at_ptrs(work, P_GO, BH), (int)gos[2], at_ptrs(work, P_V, BH), (int)vs[2],
                0.0f, at_ptrs(work, P_DP, BH), Tk, (int)BH);
    at_softmax(B, H, Tq, Tk, at_mask_of(mask_kind, mask, ms), S, NULL, lse, want_ds ? dP : NULL);
    if (gv) /* dV += P^T dO */
        at_gemm(compute, 1, 0, Tk, D, Tq, 1.0f, at_ptrs(work, P_S, BH), Tk, at_ptrs(work, P_GO, BH), (int)gos[2], 1.0f,
                at_ptrs(work, P_GV, BH), (int)gvs[2], (int)BH);
    if (gq) /* dQ += scale dS K */
        at_gemm(compute, 0, 0, Tq, D, Tk, scale, at_ptrs(work, P_DP, BH), Tk, at_ptrs(work, P_K, BH), (int)ks[2], 1.0f,
                at_ptrs(work, P_GQ, BH), (int)gqs[2], (int)BH);
    if (gk) /* dK += scale dS^T Q */
        at_gemm(compute, 1, 0, Tk, D, Tq, scale, at_ptrs(work, P_DP, BH), Tk, at_ptrs(work, P_Q, BH), (int)qs[2], 1.0f,
                at_ptrs(work, P_GK, BH), (int)gks[2], (int)BH);
}
