/* attention.cu — fused scaled-dot-product attention, forward and backward, in the flash-attention
 * style: scores are computed tile by tile in shared memory and never written to global memory;
 * the forward keeps a running max / sum (online softmax) and saves lse = logsumexp of each score
 * row; the backward recomputes p = exp(s - lse). Mirrors cpu_attention / cpu_attention_backward
 * (kernels/cpu), which materialise one head's scores at a time.
 *
 * Semantics (kernels/backend.h): s = scale * q.k (+ mask[b,h,i,j] for MASK_ADD; -inf where
 * mask == 0 for MASK_BOOL), o = softmax(s) v. A row whose scores are all -inf gets o = 0 and
 * lse = +inf (as cpu_attention: exp(s - lse) = 0 in the backward), and contributes no gradient.
 *
 * Layout: a warp owns one row (a query row in the forward and the dq pass, a key row in the dk/dv
 * pass); a lane owns the score of one of the 32 keys (queries) of the current tile and the head
 * dims lane, lane+32, ... of the accumulators. Head dim D <= 128. fp32 math throughout (also in
 * bf16 mode: attention is a small share of a ViT's FLOPs). Accumulation order differs from the
 * CPU's, so expect ~1e-6 relative differences (tolerance 1e-5 in the parity test).
 *
 * Backward work buffer: delta[i] = sum_d go[i,d] * o[i,d] (B*H*Tq floats). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_gemm.h"
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define AT_TILE 32 /* keys (or queries) per tile = lanes */
#define AT_WARPS 8 /* rows per block */
#define AT_MAXD 128
#define AT_PAD (AT_MAXD + 1) /* row pitch of tiles read column-wise (no bank conflicts) */

struct at_strides {
    int64_t q[3], k[3], v[3], o[3], go[3], gq[3], gk[3], gv[3], m[4];
};

__device__ __forceinline__ float at_mask(int kind, const float *mask, const at_strides &s, int b, int h,
                                         int i, int j) {
    if (kind == MASK_NONE) return 0.0f;
    float mv = mask[b * s.m[0] + h * s.m[1] + (int64_t)i * s.m[2] + (int64_t)j * s.m[3]];
    if (kind == MASK_ADD) return mv;
    return mv == 0.0f ? -INFINITY : 0.0f;
}

/* Load rows [r0, r0+32) (zero beyond `n`) of a (t, d)-strided head into a [32][pitch] tile. */
__device__ __forceinline__ void at_load_tile(float *tile, int pitch, const float *base, int64_t ts,
                                             int r0, int n, int D) {
    for (int e = threadIdx.x; e < AT_TILE * D; e += blockDim.x) {
        int r = e / D, d = e % D;
        tile[r * pitch + d] = r0 + r < n ? base[(int64_t)(r0 + r) * ts + d] : 0.0f;
    }
}

/* ---------------- forward ---------------- */
template <int DT>
__global__ void __launch_bounds__(AT_WARPS * 32)
k_attention_fwd(int H, int Tq, int Tk, int D, float scale, const float *q, const float *k, const float *v,
                int mask_kind, const float *mask, at_strides s, float *o, float *lse) {
    __shared__ float Ks[AT_TILE * AT_PAD];
    __shared__ float Vs[AT_TILE * AT_MAXD];
    __shared__ float Qs[AT_WARPS][AT_MAXD];
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * AT_WARPS + warp;
    bool active = i < Tq;
    const float *qb = q + b * s.q[0] + h * s.q[1], *kb = k + b * s.k[0] + h * s.k[1];
    const float *vb = v + b * s.v[0] + h * s.v[1];
    if (active)
        for (int d = lane; d < D; d += 32) Qs[warp][d] = qb[(int64_t)i * s.q[2] + d];
    float m = -INFINITY, l = 0.0f, acc[DT];
#pragma unroll
    for (int t = 0; t < DT; t++) acc[t] = 0.0f;

    for (int j0 = 0; j0 < Tk; j0 += AT_TILE) {
        __syncthreads(); /* previous tile fully consumed */
        at_load_tile(Ks, AT_PAD, kb, s.k[2], j0, Tk, D);
        at_load_tile(Vs, AT_MAXD, vb, s.v[2], j0, Tk, D);
        __syncthreads();
        if (!active) continue;
        int j = j0 + lane;
        float sc = -INFINITY;
        if (j < Tk) {
            float dot = 0.0f;
            for (int d = 0; d < D; d++) dot += Qs[warp][d] * Ks[lane * AT_PAD + d];
            sc = scale * dot + at_mask(mask_kind, mask, s, b, h, i, j);
        }
        float mn = fmaxf(m, cu_warp_max(sc));
        if (mn == -INFINITY) continue; /* everything so far masked */
        float p = expf(sc - mn), corr = expf(m - mn);
        l = l * corr + cu_warp_sum(p);
        m = mn;
#pragma unroll
        for (int t = 0; t < DT; t++) acc[t] *= corr;
        for (int jj = 0; jj < AT_TILE; jj++) {
            float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
            for (int t = 0; t < DT; t++) {
                int d = lane + 32 * t;
                if (d < D) acc[t] += pj * Vs[jj * AT_MAXD + d];
            }
        }
    }
    if (!active) return;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float *ob = o + b * s.o[0] + h * s.o[1] + (int64_t)i * s.o[2];
#pragma unroll
    for (int t = 0; t < DT; t++) {
        int d = lane + 32 * t;
        if (d < D) ob[d] = acc[t] * inv;
    }
    if (lane == 0) lse[(int64_t)bh * Tq + i] = l > 0.0f ? m + logf(l) : INFINITY;
}

/* ---------------- backward ---------------- */
/* delta[i] = <go_i, o_i> (one warp per query row) */
__global__ void k_attention_delta(int H, int Tq, int D, const float *o, const float *go, at_strides s,
                                  float *delta) {
    int64_t row = (int64_t)blockIdx.x * AT_WARPS + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= Tq) return;
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    const float *orow = o + b * s.o[0] + h * s.o[1] + row * s.o[2];
    const float *grow = go + b * s.go[0] + h * s.go[1] + row * s.go[2];
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc += orow[d] * grow[d];
    acc = cu_warp_sum(acc);
    if (lane == 0) delta[(int64_t)bh * Tq + row] = acc;
}

/* dq_i += scale * sum_j p_ij (dp_ij - delta_i) k_j,  dp_ij = <go_i, v_j> */
template <int DT>
__global__ void __launch_bounds__(AT_WARPS * 32)
k_attention_dq(int H, int Tq, int Tk, int D, float scale, const float *q, const float *k, const float *v,
               int mask_kind, const float *mask, const float *go, const float *lse, const float *delta,
               at_strides s, float *gq) {
    __shared__ float Ks[AT_TILE * AT_PAD];
    __shared__ float Vs[AT_TILE * AT_PAD];
    __shared__ float Qs[AT_WARPS][AT_MAXD];
    __shared__ float Gs[AT_WARPS][AT_MAXD];
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * AT_WARPS + warp;
    bool active = i < Tq;
    float L = INFINITY, dl = 0.0f;
    if (active) {
        const float *qr = q + b * s.q[0] + h * s.q[1] + (int64_t)i * s.q[2];
        const float *gr = go + b * s.go[0] + h * s.go[1] + (int64_t)i * s.go[2];
        for (int d = lane; d < D; d += 32) {
            Qs[warp][d] = qr[d];
            Gs[warp][d] = gr[d];
        }
        L = lse[(int64_t)bh * Tq + i];
        dl = delta[(int64_t)bh * Tq + i];
    }
    if (L == INFINITY) active = false; /* fully masked row: no gradient */
    const float *kb = k + b * s.k[0] + h * s.k[1], *vb = v + b * s.v[0] + h * s.v[1];
    float acc[DT];
#pragma unroll
    for (int t = 0; t < DT; t++) acc[t] = 0.0f;
    for (int j0 = 0; j0 < Tk; j0 += AT_TILE) {
        __syncthreads();
        at_load_tile(Ks, AT_PAD, kb, s.k[2], j0, Tk, D);
        at_load_tile(Vs, AT_PAD, vb, s.v[2], j0, Tk, D);
        __syncthreads();
        if (!active) continue;
        int j = j0 + lane;
        float ds = 0.0f;
        if (j < Tk) {
            float dot = 0.0f, dp = 0.0f;
            for (int d = 0; d < D; d++) {
                dot += Qs[warp][d] * Ks[lane * AT_PAD + d];
                dp += Gs[warp][d] * Vs[lane * AT_PAD + d];
            }
            float sc = scale * dot + at_mask(mask_kind, mask, s, b, h, i, j);
            float p = sc == -INFINITY ? 0.0f : expf(sc - L);
            ds = p * (dp - dl);
        }
        for (int jj = 0; jj < AT_TILE; jj++) {
            float dj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
            for (int t = 0; t < DT; t++) {
                int d = lane + 32 * t;
                if (d < D) acc[t] += dj * Ks[jj * AT_PAD + d];
            }
        }
    }
    if (!active) return;
    float *gr = gq + b * s.gq[0] + h * s.gq[1] + (int64_t)i * s.gq[2];
#pragma unroll
    for (int t = 0; t < DT; t++) {
        int d = lane + 32 * t;
        if (d < D) gr[d] += scale * acc[t];
    }
}

/* dv_j += sum_i p_ij go_i;  dk_j += scale * sum_i p_ij (dp_ij - delta_i) q_i  (one warp per key) */
template <int DT>
__global__ void __launch_bounds__(AT_WARPS * 32)
k_attention_dkv(int H, int Tq, int Tk, int D, float scale, const float *q, const float *k, const float *v,
                int mask_kind, const float *mask, const float *go, const float *lse, const float *delta,
                at_strides s, float *gk, float *gv) {
    __shared__ float Qs[AT_TILE * AT_PAD];
    __shared__ float Gs[AT_TILE * AT_PAD];
    __shared__ float Ksw[AT_WARPS][AT_MAXD];
    __shared__ float Vsw[AT_WARPS][AT_MAXD];
    __shared__ float Ls[AT_TILE], Ds[AT_TILE];
    int bh = blockIdx.y, b = bh / H, h = bh % H;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int j = blockIdx.x * AT_WARPS + warp;
    bool active = j < Tk;
    if (active) {
        const float *kr = k + b * s.k[0] + h * s.k[1] + (int64_t)j * s.k[2];
        const float *vr = v + b * s.v[0] + h * s.v[1] + (int64_t)j * s.v[2];
        for (int d = lane; d < D; d += 32) {
            Ksw[warp][d] = kr[d];
            Vsw[warp][d] = vr[d];
        }
    }
    const float *qb = q + b * s.q[0] + h * s.q[1], *gb = go + b * s.go[0] + h * s.go[1];
    float ak[DT], av[DT];
#pragma unroll
    for (int t = 0; t < DT; t++) ak[t] = av[t] = 0.0f;
    for (int i0 = 0; i0 < Tq; i0 += AT_TILE) {
        __syncthreads();
        at_load_tile(Qs, AT_PAD, qb, s.q[2], i0, Tq, D);
        at_load_tile(Gs, AT_PAD, gb, s.go[2], i0, Tq, D);
        if (threadIdx.x < AT_TILE) {
            int ii = i0 + threadIdx.x;
            Ls[threadIdx.x] = ii < Tq ? lse[(int64_t)bh * Tq + ii] : INFINITY;
            Ds[threadIdx.x] = ii < Tq ? delta[(int64_t)bh * Tq + ii] : 0.0f;
        }
        __syncthreads();
        if (!active) continue;
        int i = i0 + lane;
        float p = 0.0f, ds = 0.0f;
        if (i < Tq && Ls[lane] != INFINITY) {
            float dot = 0.0f, dp = 0.0f;
            for (int d = 0; d < D; d++) {
                dot += Qs[lane * AT_PAD + d] * Ksw[warp][d];
                dp += Gs[lane * AT_PAD + d] * Vsw[warp][d];
            }
            float sc = scale * dot + at_mask(mask_kind, mask, s, b, h, i, j);
            p = sc == -INFINITY ? 0.0f : expf(sc - Ls[lane]);
            ds = p * (dp - Ds[lane]);
        }
        for (int ii = 0; ii < AT_TILE; ii++) {
            float pi = __shfl_sync(0xffffffffu, p, ii), di = __shfl_sync(0xffffffffu, ds, ii);
#pragma unroll
            for (int t = 0; t < DT; t++) {
                int d = lane + 32 * t;
                if (d < D) {
                    av[t] += pi * Gs[ii * AT_PAD + d];
                    ak[t] += di * Qs[ii * AT_PAD + d];
                }
            }
        }
    }
    if (!active) return;
    float *gkr = gk ? gk + b * s.gk[0] + h * s.gk[1] + (int64_t)j * s.gk[2] : NULL;
    float *gvr = gv ? gv + b * s.gv[0] + h * s.gv[1] + (int64_t)j * s.gv[2] : NULL;
#pragma unroll
    for (int t = 0; t < DT; t++) {
        int d = lane + 32 * t;
        if (d < D) {
            if (gk) gkr[d] += scale * ak[t];
            if (gv) gvr[d] += av[t];
        }
    }
}

/* ---------------- host side ---------------- */
/* The one place ENDORET_CUDA_ATTENTION is read: mma | gemm | fused pin a path (tests, benchmarks);
 * flash pins the tensor-core path with its register-resident kernels (attention_flash.cu: the
 * one-pass forward and a backward without workspace); auto or unset lets the shapes decide.
 * Another value is recorded as the backend's error (the step's device check stops the run naming
 * the variable) and auto is used. */
enum at_pin { PIN_AUTO, PIN_MMA, PIN_GEMM, PIN_FUSED, PIN_FLASH };
static at_pin at_pinned(void) {
    const char *e = getenv("ENDORET_CUDA_ATTENTION");
    if (!e || !*e || !strcmp(e, "auto")) return PIN_AUTO;
    if (!strcmp(e, "mma")) return PIN_MMA;
    if (!strcmp(e, "flash")) return PIN_FLASH;
    if (!strcmp(e, "gemm")) return PIN_GEMM;
    if (!strcmp(e, "fused")) return PIN_FUSED;
    cuda_record_msg("ENDORET_CUDA_ATTENTION: expected mma, flash, gemm, fused or auto", __FILE__, __LINE__);
    return PIN_AUTO;
}

/* The path of a call: the tensor cores (attention_mma.cu) where they can run and, unless pinned,
 * measured faster; else the cuBLAS path (attention_gemm.cu) while its scores fit their budget (or
 * pinned, within the softmax grid); else these fused kernels. allow_mma = 0: the choice after the
 * tensor-core path declined a call (rows not 16-byte aligned). */
enum at_path { PATH_MMA, PATH_GEMM, PATH_FUSED };
static at_path at_choose(int compute, int B, int H, int Tq, int Tk, int D, int mask_kind, bool allow_mma,
                         bool *flash = NULL) {
    const at_pin pin = at_pinned();
    const bool pinned = pin == PIN_MMA || pin == PIN_FLASH;
    if (flash) *flash = pin == PIN_FLASH; /* which kernels the tensor-core path runs */
    if (allow_mma && (pin == PIN_AUTO || pinned) && cu_attention_mma_fits(compute, B, H, Tq, Tk, D, mask_kind, pinned))
        return PATH_MMA;
    if (pin == PIN_GEMM) return B <= 65535 ? PATH_GEMM : PATH_FUSED;
    return pin != PIN_FUSED && cu_attention_gemm_fits(B, H, Tq, Tk) ? PATH_GEMM : PATH_FUSED;
}

static size_t at_path_workspace(at_path p, bool flash, int B, int H, int Tq, int Tk) {
    if (p == PATH_MMA) return cu_attention_mma_workspace(B, H, Tq, Tk, flash);
    if (p == PATH_GEMM) return cu_attention_gemm_workspace(B, H, Tq, Tk);
    return (size_t)B * H * Tq; /* the fused backward's delta */
}

/* Asked without the mask kind: enough for the unmasked call's path and for the path a masked call
 * (or one the tensor cores decline) takes. */
size_t cu_attention_workspace(int compute, int B, int H, int Tq, int Tk, int D) {
    bool flash;
    const at_path p = at_choose(compute, B, H, Tq, Tk, D, MASK_NONE, true, &flash);
    size_t a = at_path_workspace(p, flash, B, H, Tq, Tk);
    size_t b = at_path_workspace(at_choose(compute, B, H, Tq, Tk, D, MASK_NONE, false), false, B, H, Tq, Tk);
    return a > b ? a : b;
}

const char *cu_attention_path(int compute, int B, int H, int Tq, int Tk, int D, int mask_kind) {
    at_path p = at_choose(compute, B, H, Tq, Tk, D, mask_kind, true);
    return p == PATH_MMA ? "mma" : p == PATH_GEMM ? "gemm" : "fused";
}

static bool at_check(int B, int H, int Tq, int Tk, int D, const char *what) {
    if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0) return false;
    if (D > AT_MAXD || (long)B * H > 65535) {
        cuda_record_msg(what, __FILE__, __LINE__);
        return false;
    }
    return true;
}

void cu_attention(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                  const float *k, const int64_t *ks, const float *v, const int64_t *vs, int mask_kind,
                  const float *mask, const int64_t *ms, float *o, const int64_t *os, float *lse,
                  float *work) {
    if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0) return;
    bool flash;
    at_path path = at_choose(compute, B, H, Tq, Tk, D, mask_kind, true, &flash);
    if (path == PATH_MMA && cu_attention_mma_fwd(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, lse, flash)) return;
    if (path == PATH_MMA) path = at_choose(compute, B, H, Tq, Tk, D, mask_kind, false);
    if (path == PATH_GEMM) {
        cu_attention_gemm_fwd(compute, B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask, ms, o, os, lse, work);
        return;
    }
    if (!at_check(B, H, Tq, Tk, D, "attention: head dim > 128 or B*H > 65535 not supported on CUDA")) return;
    at_strides s = {};
    cu_copy3(s.q, qs);
    cu_copy3(s.k, ks);
    cu_copy3(s.v, vs);
    cu_copy3(s.o, os);
    if (mask_kind != MASK_NONE)
        for (int i = 0; i < 4; i++) s.m[i] = ms[i];
    dim3 grid((Tq + AT_WARPS - 1) / AT_WARPS, B * H);
    int dt = (D + 31) / 32;
    cudaStream_t st = cuda_stream();
#define FWD(DT) k_attention_fwd<DT><<<grid, AT_WARPS * 32, 0, st>>>(H, Tq, Tk, D, scale, q, k, v, mask_kind, mask, s, o, lse)
    if (dt == 1) FWD(1);
    else if (dt == 2) FWD(2);
    else if (dt == 3) FWD(3);
    else FWD(4);
#undef FWD
    CUDA_LAUNCHED("attention");
}

void cu_attention_backward(int compute, int B, int H, int Tq, int Tk, int D, float scale, const float *q,
                           const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                           const int64_t *vs, int mask_kind, const float *mask, const int64_t *ms,
                           const float *o, const int64_t *os, const float *go, const int64_t *gos,
                           const float *lse, float *gq, const int64_t *gqs, float *gk,
                           const int64_t *gks, float *gv, const int64_t *gvs, float *work) {
    if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0) return;
    bool flash;
    at_path path = at_choose(compute, B, H, Tq, Tk, D, mask_kind, true, &flash);
    if (path == PATH_MMA && cu_attention_mma_bwd(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, go, gos, lse, gq,
                                                 gqs, gk, gks, gv, gvs, work, flash, true))
        return;
    if (path == PATH_MMA) path = at_choose(compute, B, H, Tq, Tk, D, mask_kind, false);
    if (path == PATH_GEMM) {
        cu_attention_gemm_bwd(compute, B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, mask_kind, mask, ms, go, gos, lse, gq,
                              gqs, gk, gks, gv, gvs, work);
        return;
    }
    if (!at_check(B, H, Tq, Tk, D, "attention_backward: head dim > 128 or B*H > 65535 not supported on CUDA"))
        return;
    at_strides s = {};
    cu_copy3(s.q, qs);
    cu_copy3(s.k, ks);
    cu_copy3(s.v, vs);
    cu_copy3(s.o, os);
    cu_copy3(s.go, gos);
    cu_copy3(s.gq, gqs);
    cu_copy3(s.gk, gks);
    cu_copy3(s.gv, gvs);
    if (mask_kind != MASK_NONE)
        for (int i = 0; i < 4; i++) s.m[i] = ms[i];
    float *delta = work;
    cudaStream_t st = cuda_stream();
    dim3 gq_grid((Tq + AT_WARPS - 1) / AT_WARPS, B * H), gk_grid((Tk + AT_WARPS - 1) / AT_WARPS, B * H);
    k_attention_delta<<<gq_grid, AT_WARPS * 32, 0, st>>>(H, Tq, D, o, go, s, delta);
    int dt = (D + 31) / 32;
#define BWD(DT)                                                                                              \
    do {                                                                                                     \
        if (gq)                                                                                              \
            k_attention_dq<DT><<<gq_grid, AT_WARPS * 32, 0, st>>>(H, Tq, Tk, D, scale, q, k, v, mask_kind,   \
                                                                 mask, go, lse, delta, s, gq);               \
        if (gk || gv)                                                                                        \
            k_attention_dkv<DT><<<gk_grid, AT_WARPS * 32, 0, st>>>(H, Tq, Tk, D, scale, q, k, v, mask_kind,  \
                                                                  mask, go, lse, delta, s, gk, gv);          \
    } while (0)
    if (dt == 1) BWD(1);
    else if (dt == 2) BWD(2);
    else if (dt == 3) BWD(3);
    else BWD(4);
#undef BWD
    CUDA_LAUNCHED("attention_backward");
}

/* bf16 storage (ops.def attention_bf16): the tensor-core kernels read and write it directly where
 * the chooser takes them (the MAE encoder's 50-token heads, its decoder's 197 x 32 heads); other
 * paths (the cuBLAS path of 197 x 64 heads, masks) decline, and the op layer widens. */
int cu_attention_bf16(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                      const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs, uint16_t *o,
                      const int64_t *os, float *lse, float *work) {
    (void)work;
    if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0) return 0;
    bool flash;
    if (at_choose(GEMM_COMPUTE_BF16, B, H, Tq, Tk, D, MASK_NONE, true, &flash) != PATH_MMA) return 0;
    return cu_attention_mma_fwd_bf16(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, lse, flash) ? 1 : 0;
}

int cu_attention_bf16_backward(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                               const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs,
                               const uint16_t *o, const int64_t *os, const uint16_t *go, const int64_t *gos,
                               const float *lse, uint16_t *gq, const int64_t *gqs, uint16_t *gk, const int64_t *gks,
                               uint16_t *gv, const int64_t *gvs, int accumulate, float *work) {
    if (B <= 0 || H <= 0 || Tq <= 0 || Tk <= 0 || D <= 0) return 0;
    bool flash;
    if (at_choose(GEMM_COMPUTE_BF16, B, H, Tq, Tk, D, MASK_NONE, true, &flash) != PATH_MMA) return 0;
    return cu_attention_mma_bwd_bf16(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, go, gos, lse, gq, gqs, gk, gks,
                                     gv, gvs, work, flash, accumulate != 0)
               ? 1
               : 0;
}
