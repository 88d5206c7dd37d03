/* attention_mma.cu — attention on the tensor cores for the short sequences of our ViTs (50 visible
 * tokens in an MAE encoder, 197 in its decoder and in a full ViT/16 at 224²): bf16 operands, fp32
 * accumulation and softmax, through the warp matrix functions (nvcuda::wmma, 16x16x16, sm_80+).
 * The CPU reference is cpu_attention / cpu_attention_backward (kernels/cpu/attention.c); in bf16
 * mode the CPU rounds the same operands (kernels/cpu/attention_bf16.c).
 *
 * One head's keys and values fit in shared memory (Tk <= 256, D <= 64: at most 74 KiB in bf16), so
 * a block loads them once and each warp owns 16 query rows (forward, dq) or 16 keys (dk, dv):
 *   forward:  pass 1 over 16-key tiles: S = Q K^T, running row max and sum (online softmax) -> lse;
 *             pass 2: S again, P = exp(scale S - lse) as bf16 rows;  O = P V.
 *   backward, kernel dq (blocks of 64 query rows): per 16-key tile S = Q K^T and dP = dO V^T,
 *             P = exp(scale S - lse), dS = scale P (dP - delta), delta_i = <dO_i, O_i>;
 *             dQ += dS K.  P and dS (bf16) go to the workspace [B*H][Tq16][Tk16] for:
 *   backward, kernel dkv (blocks of 64 keys): dV += P^T dO, dK += dS^T Q, the transposes being
 *             column-major fragment loads of the workspace.
 * Rows and columns past Tq / Tk are zero in every bf16 tile, so they add nothing. Deterministic: no
 * atomics; each output element is written by one warp in a fixed order.
 * Global memory is read and written as float4: the tensors' rows must be 16-byte aligned with row
 * strides a multiple of 4 (true for packed qkv views); otherwise, and for masked attention, the
 * cuBLAS / fused paths run. Shared-memory tiles have their rows padded by 8 bf16 (4 floats) so the
 * fragment loads do not hit one bank. ENDORET_CUDA_ATTENTION=flash runs attention_flash.cu's
 * kernels instead (same shapes, same entry points). */
#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/attention_tile.h"
#include "kernels/cuda/cuda_common.h"

using namespace nvcuda;

#define AM_MAXT 256
#define AM_MAXD 64

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> frag_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc;

/* Shared memory of the row kernels (forward, dq): K and V [Tk16][D+8] bf16, then per warp a bf16
 * row buffer [16][max(Tk16, D) + 8] (Q and dO on their way to registers, then P or dS) and an fp32
 * staging area [16][D+4] (at least 2 16x16 tiles: S and dP). */
__host__ __device__ static inline int am_pitch_rows(int TkP, int D) { return (TkP > D ? TkP : D) + 8; }
__host__ __device__ static inline size_t am_stage_floats(int D) { return 16 * (D + 4) > 512 ? 16 * (D + 4) : 512; }
__host__ __device__ static inline size_t am_warp_bytes(int TkP, int D) {
    return am_al((size_t)16 * am_pitch_rows(TkP, D) * 2) + am_al(am_stage_floats(D) * 4);
}
__host__ __device__ static inline size_t am_rows_smem(int Tk, int D) {
    int TkP = am_r16(Tk);
    return 2 * am_al((size_t)TkP * (D + 8) * 2) + AM_WARPS * am_warp_bytes(TkP, D);
}
/* The dkv kernel: Q and dO [Tq16][D+8] bf16, per warp an fp32 staging [16][D+4]. */
__host__ __device__ static inline size_t am_cols_smem(int Tq, int D) {
    return 2 * am_al((size_t)am_r16(Tq) * (D + 8) * 2) + AM_WARPS * am_al((size_t)16 * (D + 4) * 4);
}

/* out rows [row0, row0 + 16) (those < n), four elements by lane: out (+)= stage[16][D+4], as
 * old + (0 + new) in fp32 and one rounding for a bf16 out (what the fp32 kernel writing into zeroed
 * scratch, then an accumulating cast, gives) */
template <int D, class T>
__device__ static inline void am_store_rows(T *out, int64_t ts, int row0, int n, const float *stage, int lane,
                                            bool accumulate) {
    constexpr int V4 = D / 4;
    for (int c = lane; c < 16 * V4; c += 32) {
        int r = c / V4, d = (c - r * V4) * 4;
        if (row0 + r >= n) continue;
        const float *sr = stage + (size_t)r * (D + 4) + d;
        T *p = out + (int64_t)(row0 + r) * ts + d;
        float4 y = make_float4(0.0f + sr[0], 0.0f + sr[1], 0.0f + sr[2], 0.0f + sr[3]);
        if (accumulate) { /* fp32: old + new, as this kernel always added (they differ only for -0 + -0) */
            const float4 old = am_get4(p), a = sizeof(T) == 2 ? y : make_float4(sr[0], sr[1], sr[2], sr[3]);
            y = make_float4(old.x + a.x, old.y + a.y, old.z + a.z, old.w + a.w);
        }
        am_put4(p, y);
    }
}

/* acc = A[16][D] (as D/16 row fragments) times (the 16 rows of X at j0)^T: X [.][D+8] bf16 */
template <int D>
__device__ static inline void am_tile_nt(frag_acc &acc, const frag_a_row *a, const bf16 *X, int j0) {
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int c = 0; c < D / 16; c++) {
        frag_b_col b; /* X^T: element (d, j) is X[j][d] */
        wmma::load_matrix_sync(b, X + (size_t)j0 * (D + 8) + c * 16, D + 8);
        wmma::mma_sync(acc, a[c], b, acc);
    }
}

/* acc[c] += R[16][TkP] (bf16 rows, pitch lr) X[TkP][D] (pitch D+8) over all 16-key tiles */
template <int D>
__device__ static inline void am_rows_times(frag_acc *acc, const bf16 *R, int lr, const bf16 *X, int TkP) {
#pragma unroll
    for (int c = 0; c < D / 16; c++) wmma::fill_fragment(acc[c], 0.0f);
    for (int j0 = 0; j0 < TkP; j0 += 16) {
        frag_a_row a;
        wmma::load_matrix_sync(a, R + j0, lr);
#pragma unroll
        for (int c = 0; c < D / 16; c++) {
            frag_b_row b;
            wmma::load_matrix_sync(b, X + (size_t)j0 * (D + 8) + c * 16, D + 8);
            wmma::mma_sync(acc[c], a, b, acc[c]);
        }
    }
}

/* a warp's 16 rows of a head -> D/16 row fragments, through its bf16 row buffer */
template <int D, class T>
__device__ static inline void am_rows_to_frags(frag_a_row *a, bf16 *buf, const T *src, int64_t ts, int row0,
                                               int n, int lane) {
    am_load<D, T>(buf, src, ts, row0, 16, n, lane, 32);
    __syncwarp();
#pragma unroll
    for (int c = 0; c < D / 16; c++) wmma::load_matrix_sync(a[c], buf + c * 16, D + 8);
    __syncwarp(); /* the buffer is rewritten next */
}

template <int D, class T>
__global__ void __launch_bounds__(AM_WARPS * 32)
k_am_fwd(int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, am_strides s, T *o, float *lse) {
    ER_DYNAMIC_SMEM(smem);
    const int TkP = am_r16(Tk), lr = am_pitch_rows(TkP, D);
    const int bh = blockIdx.y, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * AM_ROWS + warp * 16;
    bf16 *Ks = (bf16 *)smem, *Vs = (bf16 *)(smem + am_al((size_t)TkP * (D + 8) * 2));
    unsigned char *w = smem + 2 * am_al((size_t)TkP * (D + 8) * 2) + warp * am_warp_bytes(TkP, D);
    bf16 *P = (bf16 *)w;
    float *St = (float *)(w + am_al((size_t)16 * lr * 2));
    am_load<D, T>(Ks, k + b * s.k[0] + h * s.k[1], s.k[2], 0, TkP, Tk, threadIdx.x, blockDim.x);
    am_load<D, T>(Vs, v + b * s.v[0] + h * s.v[1], s.v[2], 0, TkP, Tk, threadIdx.x, blockDim.x);
    __syncthreads();
    if (row0 >= Tq) return; /* the whole warp; nothing below synchronises the block */
    frag_a_row qa[D / 16];
    am_rows_to_frags<D, T>(qa, P, q + b * s.q[0] + h * s.q[1], s.q[2], row0, Tq, lane);
    /* lane: row r = lane % 16, columns half*8 .. +8 of each 16-key tile */
    const int r = lane & 15, half = lane >> 4;
    float m = -INFINITY, l = 0.0f;
    frag_acc acc;
    for (int j0 = 0; j0 < TkP; j0 += 16) { /* pass 1: row max and sum, online */
        am_tile_nt<D>(acc, qa, Ks, j0);
        wmma::store_matrix_sync(St, acc, 16, wmma::mem_row_major);
        __syncwarp();
        float sv[8], mt = -INFINITY;
#pragma unroll
        for (int c = 0; c < 8; c++) {
            int j = j0 + half * 8 + c;
            sv[c] = j < Tk ? scale * St[r * 16 + half * 8 + c] : -INFINITY;
            mt = fmaxf(mt, sv[c]);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 16));
        float mn = fmaxf(m, mt), part = 0.0f;
#pragma unroll
        for (int c = 0; c < 8; c++) part += sv[c] == -INFINITY ? 0.0f : expf(sv[c] - mn);
        part += __shfl_xor_sync(0xffffffffu, part, 16);
        l = (m == -INFINITY ? 0.0f : l * expf(m - mn)) + part;
        m = mn;
        __syncwarp(); /* St is rewritten by the next tile */
    }
    const float ls = m + logf(l);
    const bool live = row0 + r < Tq;
    for (int j0 = 0; j0 < TkP; j0 += 16) { /* pass 2: P = exp(scale S - lse) in bf16 */
        am_tile_nt<D>(acc, qa, Ks, j0);
        wmma::store_matrix_sync(St, acc, 16, wmma::mem_row_major);
        __syncwarp();
#pragma unroll
        for (int c = 0; c < 8; c++) {
            int j = j0 + half * 8 + c;
            float p = live && j < Tk ? expf(scale * St[r * 16 + half * 8 + c] - ls) : 0.0f;
            P[(size_t)r * lr + j] = __float2bfloat16(p);
        }
        __syncwarp();
    }
    frag_acc oa[D / 16];
    am_rows_times<D>(oa, P, lr, Vs, TkP);
#pragma unroll
    for (int c = 0; c < D / 16; c++) wmma::store_matrix_sync(St + c * 16, oa[c], D + 4, wmma::mem_row_major);
    __syncwarp();
    am_store_rows<D, T>(o + b * s.o[0] + h * s.o[1], s.o[2], row0, Tq, St, lane, false);
    if (half == 0 && live) lse[(int64_t)bh * Tq + row0 + r] = ls;
}

template <int D, class T>
__global__ void __launch_bounds__(AM_WARPS * 32)
k_am_dq(int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const T *o, const T *go,
        const float *lse, am_strides s, T *gq, bf16 *Pg, bf16 *dSg, bool accumulate) {
    ER_DYNAMIC_SMEM(smem);
    const int TkP = am_r16(Tk), TqP = am_r16(Tq), lr = am_pitch_rows(TkP, D);
    const int bh = blockIdx.y, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * AM_ROWS + warp * 16;
    bf16 *Ks = (bf16 *)smem, *Vs = (bf16 *)(smem + am_al((size_t)TkP * (D + 8) * 2));
    unsigned char *w = smem + 2 * am_al((size_t)TkP * (D + 8) * 2) + warp * am_warp_bytes(TkP, D);
    bf16 *dS = (bf16 *)w;
    float *St = (float *)(w + am_al((size_t)16 * lr * 2));
    am_load<D, T>(Ks, k + b * s.k[0] + h * s.k[1], s.k[2], 0, TkP, Tk, threadIdx.x, blockDim.x);
    am_load<D, T>(Vs, v + b * s.v[0] + h * s.v[1], s.v[2], 0, TkP, Tk, threadIdx.x, blockDim.x);
    __syncthreads();
    if (row0 >= Tq) return; /* rows up to Tq16 belong to the last active warp */
    const T *gob = go + b * s.go[0] + h * s.go[1], *ob = o + b * s.o[0] + h * s.o[1];
    frag_a_row qa[D / 16], ga[D / 16];
    am_rows_to_frags<D, T>(qa, dS, q + b * s.q[0] + h * s.q[1], s.q[2], row0, Tq, lane);
    am_rows_to_frags<D, T>(ga, dS, gob, s.go[2], row0, Tq, lane);
    const int r = lane & 15, half = lane >> 4, i = row0 + r;
    const bool live = i < Tq;
    float dl = 0.0f; /* delta_i = <dO_i, O_i> in fp32, each half of the lanes over half the dims */
    if (live)
        for (int d = half * (D / 2); d < (half + 1) * (D / 2); d++) dl += am_get(gob + (int64_t)i * s.go[2] + d) * am_get(ob + (int64_t)i * s.o[2] + d);
    dl += __shfl_xor_sync(0xffffffffu, dl, 16);
    const float ls = live ? lse[(int64_t)bh * Tq + i] : 0.0f;
    const size_t grow = ((size_t)bh * TqP + i) * TkP; /* this lane's row in the workspace */
    frag_acc acc;
    for (int j0 = 0; j0 < TkP; j0 += 16) {
        am_tile_nt<D>(acc, qa, Ks, j0);
        wmma::store_matrix_sync(St, acc, 16, wmma::mem_row_major);
        am_tile_nt<D>(acc, ga, Vs, j0); /* dP = dO V^T */
        wmma::store_matrix_sync(St + 256, acc, 16, wmma::mem_row_major);
        __syncwarp();
        bf16 pv[8], dv[8];
#pragma unroll
        for (int c = 0; c < 8; c++) {
            int j = j0 + half * 8 + c;
            bool ok = live && j < Tk;
            float p = ok ? expf(scale * St[r * 16 + half * 8 + c] - ls) : 0.0f;
            pv[c] = __float2bfloat16(p);
            dv[c] = __float2bfloat16(ok ? scale * p * (St[256 + r * 16 + half * 8 + c] - dl) : 0.0f);
            dS[(size_t)r * lr + j] = dv[c];
        }
        if (Pg) { /* 8 bf16 = one 16-byte store per lane */
            uint4 pk, dk;
            memcpy(&pk, pv, sizeof pk);
            memcpy(&dk, dv, sizeof dk);
            *(uint4 *)(Pg + grow + j0 + half * 8) = pk;
            *(uint4 *)(dSg + grow + j0 + half * 8) = dk;
        }
        __syncwarp(); /* St is rewritten by the next tile */
    }
    if (!gq) return;
    frag_acc qacc[D / 16];
    am_rows_times<D>(qacc, dS, lr, Ks, TkP); /* dQ = dS K */
#pragma unroll
    for (int c = 0; c < D / 16; c++) wmma::store_matrix_sync(St + c * 16, qacc[c], D + 4, wmma::mem_row_major);
    __syncwarp();
    am_store_rows<D, T>(gq + b * s.gq[0] + h * s.gq[1], s.gq[2], row0, Tq, St, lane, accumulate);
}

template <int D, class T>
__global__ void __launch_bounds__(AM_WARPS * 32)
k_am_dkv(int H, int Tq, int Tk, const T *q, const T *go, am_strides s, const bf16 *Pg, const bf16 *dSg, T *gk,
         T *gv, bool accumulate) {
    ER_DYNAMIC_SMEM(smem);
    const int TkP = am_r16(Tk), TqP = am_r16(Tq);
    const int bh = blockIdx.y, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int k0 = blockIdx.x * AM_ROWS + warp * 16;
    const size_t qbytes = am_al((size_t)TqP * (D + 8) * 2);
    bf16 *Qs = (bf16 *)smem, *Gs = (bf16 *)(smem + qbytes);
    float *St = (float *)(smem + 2 * qbytes + warp * am_al((size_t)16 * (D + 4) * 4));
    am_load<D, T>(Qs, q + b * s.q[0] + h * s.q[1], s.q[2], 0, TqP, Tq, threadIdx.x, blockDim.x);
    am_load<D, T>(Gs, go + b * s.go[0] + h * s.go[1], s.go[2], 0, TqP, Tq, threadIdx.x, blockDim.x);
    __syncthreads();
    if (k0 >= Tk) return;
    const bf16 *Pb = Pg + (size_t)bh * TqP * TkP + k0, *dSb = dSg + (size_t)bh * TqP * TkP + k0;
    frag_acc va[D / 16], ka[D / 16];
#pragma unroll
    for (int c = 0; c < D / 16; c++) {
        wmma::fill_fragment(va[c], 0.0f);
        wmma::fill_fragment(ka[c], 0.0f);
    }
    for (int i0 = 0; i0 < TqP; i0 += 16) {
        frag_a_col pt, dst; /* P^T and dS^T: the workspace's [query][key] tiles read column-major */
        wmma::load_matrix_sync(pt, Pb + (size_t)i0 * TkP, TkP);
        wmma::load_matrix_sync(dst, dSb + (size_t)i0 * TkP, TkP);
#pragma unroll
        for (int c = 0; c < D / 16; c++) {
            frag_b_row gb, qb;
            wmma::load_matrix_sync(gb, Gs + (size_t)i0 * (D + 8) + c * 16, D + 8);
            wmma::load_matrix_sync(qb, Qs + (size_t)i0 * (D + 8) + c * 16, D + 8);
            wmma::mma_sync(va[c], pt, gb, va[c]); /* dV += P^T dO */
            wmma::mma_sync(ka[c], dst, qb, ka[c]); /* dK += dS^T Q */
        }
    }
    for (int which = 0; which < 2; which++) {
        T *g = which ? gk : gv;
        if (!g) continue;
#pragma unroll
        for (int c = 0; c < D / 16; c++)
            wmma::store_matrix_sync(St + c * 16, which ? ka[c] : va[c], D + 4, wmma::mem_row_major);
        __syncwarp();
        am_store_rows<D, T>(g + b * (which ? s.gk[0] : s.gv[0]) + h * (which ? s.gk[1] : s.gv[1]), which ? s.gk[2] : s.gv[2],
                         k0, Tk, St, lane, accumulate);
        __syncwarp(); /* the staging is read before the next store overwrites it */
    }
}

/* auto's choice among the shapes this path takes, from `endoret bench cuda` on an H100
 * (bench/RESULTS_cuda.md, session 9): faster than the cuBLAS path for 50-token heads (forward 2.3x,
 * backward 1.4x) and for 197 x 32 heads (1.5x, 1.6x), slower for 197 x 64 heads (0.85x, 0.86x). The
 * 128-token boundary lies between measured points. */
static bool am_auto_prefers(int Tq, int Tk, int D) { return D <= 32 || (Tq <= 128 && Tk <= 128); }

bool cu_attention_mma_fits(int compute, int B, int H, int Tq, int Tk, int D, int mask_kind, bool pinned) {
    return mask_kind == MASK_NONE && compute == GEMM_COMPUTE_BF16 && D % 16 == 0 && D >= 16 && D <= AM_MAXD &&
           Tq >= 1 && Tq <= AM_MAXT && Tk >= 1 && Tk <= AM_MAXT && B >= 1 && H >= 1 && (int64_t)B * H <= 65535 &&
           (pinned || am_auto_prefers(Tq, Tk, D));
}

size_t cu_attention_mma_workspace(int B, int H, int Tq, int Tk, bool flash) {
    if (flash) return 0; /* the flash backward recomputes P and dS in registers */
    return (size_t)B * H * am_r16(Tq) * am_r16(Tk) + 64; /* two bf16 arrays, and 256 bytes to align them */
}

/* vector access (four elements): a base aligned to four elements' bytes and (b, h, t) strides that
 * are multiples of 4 elements */
template <class T> static bool am_vec_ok(const T *p, const int64_t *st) {
    return !p || ((uintptr_t)p % (4 * sizeof(T)) == 0 && st[0] % 4 == 0 && st[1] % 4 == 0 && st[2] % 4 == 0);
}

template <int D, class T>
static void am_fwd(int B, int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const am_strides &s,
                   T *o, float *lse) {
    static size_t optin = 0;
    const size_t smem = am_rows_smem(Tk, D);
    if (!am_smem_optin(k_am_fwd<D, T>, smem, &optin)) return;
    dim3 grid((Tq + AM_ROWS - 1) / AM_ROWS, B * H);
    k_am_fwd<D, T><<<grid, AM_WARPS * 32, smem, cuda_stream()>>>(H, Tq, Tk, scale, q, k, v, s, o, lse);
    CUDA_LAUNCHED("attention (tensor cores)");
}

template <int D, class T>
static void am_bwd(int B, int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const T *o,
                   const T *go, const float *lse, const am_strides &s, T *gq, T *gk, T *gv, bf16 *Pg, bf16 *dSg,
                   bool accumulate) {
    static size_t optin_dq = 0, optin_dkv = 0;
    bool kv = gk || gv;
    cudaStream_t st = cuda_stream();
    size_t smem = am_rows_smem(Tk, D);
    if (!am_smem_optin(k_am_dq<D, T>, smem, &optin_dq)) return;
    dim3 gq_grid((Tq + AM_ROWS - 1) / AM_ROWS, B * H);
    k_am_dq<D, T><<<gq_grid, AM_WARPS * 32, smem, st>>>(H, Tq, Tk, scale, q, k, v, o, go, lse, s, gq, kv ? Pg : NULL,
                                                        kv ? dSg : NULL, accumulate);
    CUDA_LAUNCHED("attention_backward dq (tensor cores)");
    if (!kv) return;
    size_t smem2 = am_cols_smem(Tq, D);
    if (!am_smem_optin(k_am_dkv<D, T>, smem2, &optin_dkv)) return;
    dim3 gk_grid((Tk + AM_ROWS - 1) / AM_ROWS, B * H);
    k_am_dkv<D, T><<<gk_grid, AM_WARPS * 32, smem2, st>>>(H, Tq, Tk, q, go, s, Pg, dSg, gk, gv, accumulate);
    CUDA_LAUNCHED("attention_backward dk/dv (tensor cores)");
}

template <class T>
static bool am_fwd_any(int B, int H, int Tq, int Tk, int D, float scale, const T *q, const int64_t *qs, const T *k,
                       const int64_t *ks, const T *v, const int64_t *vs, T *o, const int64_t *os, float *lse, bool flash) {
    if (!am_vec_ok(q, qs) || !am_vec_ok(k, ks) || !am_vec_ok(v, vs) || !am_vec_ok(o, os)) return false;
    am_strides s = {};
    cu_copy3(s.q, qs);
    cu_copy3(s.k, ks);
    cu_copy3(s.v, vs);
    cu_copy3(s.o, os);
    if (flash) {
        cu_attention_flash_fwd(B, H, Tq, Tk, D, scale, q, k, v, s, o, lse);
        return true;
    }
#define AM_FWD(DD) am_fwd<DD, T>(B, H, Tq, Tk, scale, q, k, v, s, o, lse)
    AM_HEAD_DIMS(AM_FWD)
#undef AM_FWD
    return true;
}

template <class T>
static bool am_bwd_any(int B, int H, int Tq, int Tk, int D, float scale, const T *q, const int64_t *qs, const T *k,
                       const int64_t *ks, const T *v, const int64_t *vs, const T *o, const int64_t *os, const T *go,
                       const int64_t *gos, const float *lse, T *gq, const int64_t *gqs, T *gk, const int64_t *gks,
                       T *gv, const int64_t *gvs, float *work, bool flash, bool accumulate) {
    if (!am_vec_ok(q, qs) || !am_vec_ok(k, ks) || !am_vec_ok(v, vs) || !am_vec_ok(o, os) || !am_vec_ok(go, gos) ||
        !am_vec_ok(gq, gqs) || !am_vec_ok(gk, gks) || !am_vec_ok(gv, gvs))
        return false;
    if (!gq && !gk && !gv) return true;
    am_strides s = {};
    cu_copy3(s.q, qs);
    cu_copy3(s.k, ks);
    cu_copy3(s.v, vs);
    cu_copy3(s.o, os);
    cu_copy3(s.go, gos);
    cu_copy3(s.gq, gqs);
    cu_copy3(s.gk, gks);
    cu_copy3(s.gv, gvs);
    if (flash) {
        cu_attention_flash_bwd(B, H, Tq, Tk, D, scale, q, k, v, o, go, lse, s, gq, gk, gv, accumulate);
        return true;
    }
    bf16 *Pg = (bf16 *)(((uintptr_t)work + 255) & ~(uintptr_t)255);
    bf16 *dSg = Pg + (size_t)B * H * am_r16(Tq) * am_r16(Tk);
#define AM_BWD(DD) am_bwd<DD, T>(B, H, Tq, Tk, scale, q, k, v, o, go, lse, s, gq, gk, gv, Pg, dSg, accumulate)
    AM_HEAD_DIMS(AM_BWD)
#undef AM_BWD
    return true;
}

bool cu_attention_mma_fwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                          const float *k, const int64_t *ks, const float *v, const int64_t *vs, float *o,
                          const int64_t *os, float *lse, bool flash) {
    return am_fwd_any<float>(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, lse, flash);
}
bool cu_attention_mma_fwd_bf16(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                               const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs, uint16_t *o,
                               const int64_t *os, float *lse, bool flash) {
    return am_fwd_any<uint16_t>(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, lse, flash);
}

bool cu_attention_mma_bwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const int64_t *qs,
                          const float *k, const int64_t *ks, const float *v, const int64_t *vs, const float *o,
                          const int64_t *os, const float *go, const int64_t *gos, const float *lse, float *gq,
                          const int64_t *gqs, float *gk, const int64_t *gks, float *gv, const int64_t *gvs,
                          float *work, bool flash, bool accumulate) {
    return am_bwd_any<float>(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, go, gos, lse, gq, gqs, gk, gks, gv, gvs,
                             work, flash, accumulate);
}
bool cu_attention_mma_bwd_bf16(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const int64_t *qs,
                               const uint16_t *k, const int64_t *ks, const uint16_t *v, const int64_t *vs,
                               const uint16_t *o, const int64_t *os, const uint16_t *go, const int64_t *gos,
                               const float *lse, uint16_t *gq, const int64_t *gqs, uint16_t *gk, const int64_t *gks,
                               uint16_t *gv, const int64_t *gvs, float *work, bool flash, bool accumulate) {
    return am_bwd_any<uint16_t>(B, H, Tq, Tk, D, scale, q, qs, k, ks, v, vs, o, os, go, gos, lse, gq, gqs, gk, gks, gv,
                                gvs, work, flash, accumulate);
}
