/* attention_flash.cu — attention on the tensor cores with the scores in registers
 * (ENDORET_CUDA_ATTENTION=flash): mma.sync m16n8k16 (bf16 in, fp32 out) for the short sequences of
 * our ViTs, the shapes attention_mma.cu takes (no mask, head dim 16..64 by 16, at most 256 tokens).
 * The CPU reference is cpu_attention / cpu_attention_backward (kernels/cpu/attention.c); the wmma
 * kernels of attention_mma.cu compute the same with S, P and dS staged through shared memory and,
 * in the backward, a global workspace. Fragment layouts: tests/cuda/emu_wmma.h, which emulates
 * the instruction lane by lane (g = lane / 4, t = lane % 4).
 *
 * Forward (k_af_fwd), one warp per 16 query rows, one pass over 64-key blocks: S = Q K^T for the
 * block lands in eight 16x8 accumulators, the row max and sum update online once a block (quad
 * shuffles: the four lanes of a row), P = exp(scale S - m) is rounded to bf16 and, because a pair
 * of accumulators has exactly the layout of an A operand, goes straight into O += P V, 16 keys at a
 * time. At the end O /= l and lse = m + log l. Against k_am_fwd: S is computed once, not twice, and
 * no tile goes through shared memory; P is rounded before normalisation (flash-attention's order),
 * so o differs from k_am_fwd's by bf16 rounding. Shared memory: K and V [Tk16][D+8].
 *
 * Backward, two kernels that each recompute P = exp(scale S - lse) and dP, so nothing is stored
 * and nothing is added atomically (deterministic), with delta_i = <dO_i, O_i> computed in both the
 * same way (af_delta):
 *   k_af_dkv, one warp per 16 keys, over 16-query tiles: S^T = K Q^T and dP^T = V dO^T with K and V
 *     as A operands held in registers; P^T and dS^T = scale P^T (dP^T - delta) become A operands in
 *     place, and dV += P^T dO, dK += dS^T Q. Shared memory: Q and dO [Tq16][D+8], lse and delta.
 *   k_af_dq, one warp per 16 queries, over 16-key tiles: S = Q K^T, dP = dO V^T with Q and dO in
 *     registers, dS in place as the A operand, dQ += dS K. Shared memory: K and V [Tk16][D+8].
 * In all three, the B operands come from row-major tiles in shared memory through ldmatrix (four
 * 8x8 matrices a call), .trans where a register pairs two rows of one column (V in P V; dO, Q, K
 * along the summed index); rows padded by 8 keep each call's 8 rows in distinct banks. P is rounded
 * to bf16 for dV, dS for dK and dQ, as the wmma backward does. Rows past Tq / Tk: their lse is +inf
 * in k_af_dkv (P = 0) and their keys are zero in k_af_dq and masked to P = 0, so they add nothing.
 * Each output element is written by one lane, after its tiles in a fixed order. */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/attention_tile.h"
#include "kernels/cuda/cuda_common.h"

__device__ static inline void af_mma(float *c, const uint32_t *a, const uint32_t *b) {
#ifdef ENDORET_CUDA_EMULATED
    emu_mma_m16n8k16_bf16(c, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
__device__ static inline uint32_t af_pack(float lo, float hi) {
    return (uint32_t)cu_f32_to_bf16(lo) | (uint32_t)cu_f32_to_bf16(hi) << 16;
}
__device__ static inline void af_put(float *p, float y) { *p = y; }
__device__ static inline void af_put(uint16_t *p, float y) { *p = cu_f32_to_bf16(y); }

/* shared memory of the kernels that stage one head's K and V (the forward, dq): [Tk16][D+8] each */
__host__ __device__ static inline size_t af_smem(int Tk, int D) { return 2 * am_al((size_t)am_r16(Tk) * (D + 8) * 2); }

/* out += y: fp32 as old + y; bf16 as round(old + (0 + y)), what the fp32 kernel writing into zeroed
 * scratch and then an accumulating cast gives (attention_tile.h: bit for bit on widened copies) */
__device__ static inline void af_acc(float *p, float y) { *p += y; }
__device__ static inline void af_acc(uint16_t *p, float y) { *p = cu_f32_to_bf16(cu_bf16_to_f32(*p) + (0.0f + y)); }

/* A fragments of a warp's 16 rows of a (t, d)-strided head, from global memory: rows row0 + g and
 * row0 + g + 8, dims c*16 + 2t (+1) and + 8; zero past n */
template <int D, class T>
__device__ static inline void af_rows_a(uint32_t (*a)[4], const T *src, int64_t ts, int row0, int n, int g, int t) {
#pragma unroll
    for (int c = 0; c < D / 16; c++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = row0 + g + (i & 1) * 8, d = c * 16 + 2 * t + (i >> 1) * 8;
            const T *p = src + (int64_t)r * ts + d;
            a[c][i] = r < n ? af_pack(am_get(p), am_get(p + 1)) : 0u;
        }
}

/* delta_i = <dO_i, O_i> of one row, by a whole warp: lanes over d, then a butterfly sum, which
 * leaves the same value in every lane (each step adds the same two numbers in either order) */
template <int D, class T>
__device__ static inline float af_delta(const T *go_row, const T *o_row, int lane) {
    float x = lane < D ? am_get(go_row + lane) * am_get(o_row + lane) : 0.0f;
    if (lane + 32 < D) x += am_get(go_row + lane + 32) * am_get(o_row + lane + 32);
#pragma unroll
    for (int m = 16; m; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
    return x;
}

/* Four 8x8 bf16 matrices from shared memory into B fragments, one row address per lane (lanes
 * 8m .. 8m + 7: the rows of matrix m; 16-byte aligned): ldmatrix; .trans gives each matrix
 * transposed, i.e. a pair of consecutive rows of one column per register. Layouts:
 * tests/cuda/emu_wmma.h (emu_ldmatrix_x4). */
__device__ static inline void af_ldsm_x4(uint32_t *r, const bf16 *p, bool trans) {
#ifdef ENDORET_CUDA_EMULATED
    emu_ldmatrix_x4(r, p, trans);
#else
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#endif
}

/* S-like tiles of a warp: acc[u] (u = 0, 1: columns 8u .. 8u + 8 of a 16-wide tile) = A (D/16
 * fragments in registers) times the 16 rows of X at r0 (row-major [.][D+8] in shared memory)^T.
 * One ldmatrix a 16-dim slice: matrices (rows r0 + 8(m / 2) .., dims + 8(m % 2)) are the B
 * fragments {b0, b1} of n-tile 0, then of n-tile 1. */
template <int D>
__device__ static inline void af_tile_nt(float (*acc)[4], const uint32_t (*a)[4], const bf16 *X, int r0, int lane) {
    const int m = lane >> 3, row = r0 + (lane & 7) + (m >> 1) * 8, col = (m & 1) * 8;
#pragma unroll
    for (int u = 0; u < 2; u++) acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.0f;
#pragma unroll
    for (int c = 0; c < D / 16; c++) {
        uint32_t xb[4];
        af_ldsm_x4(xb, X + (size_t)row * (D + 8) + c * 16 + col, false);
        af_mma(acc[0], a[c], xb);
        af_mma(acc[1], a[c], xb + 2);
    }
}

/* acc[n] (n-tiles of D) += A (16 x 16, in registers) times the 16 rows of X at r0 (row-major
 * [.][D+8]): the B operand pairs rows of one column, so ldmatrix .trans, two n-tiles a call
 * (matrices: rows r0 + 8(m % 2) .., columns of n-tile n + m / 2). */
template <int D>
__device__ static inline void af_tile_nn(float (*acc)[4], const uint32_t *a, const bf16 *X, int r0, int lane) {
    const int m = lane >> 3, row = r0 + (lane & 7) + (m & 1) * 8, col = (m >> 1) * 8;
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
        uint32_t xb[4];
        af_ldsm_x4(xb, X + (size_t)row * (D + 8) + n * 8 + col, true);
        af_mma(acc[n], a, xb);
        af_mma(acc[n + 1], a, xb + 2);
    }
}

/* the A operand of a 16 x 16 tile held as two 16x8 accumulators (the same layout) */
__device__ static inline void af_acc_to_a(uint32_t *a, const float (*x)[4]) {
    a[0] = af_pack(x[0][0], x[0][1]);
    a[1] = af_pack(x[0][2], x[0][3]);
    a[2] = af_pack(x[1][0], x[1][1]);
    a[3] = af_pack(x[1][2], x[1][3]);
}

/* rows row0 + g (+ 8) of a warp's D-wide accumulators, added into out where < n; or written as
 * 0 + acc (what adding into zeros gives) when not accumulating */
template <int D, class T>
__device__ static inline void af_store_acc(T *out, int64_t ts, int row0, int n, const float (*acc)[4], int g, int t,
                                           bool accumulate) {
#pragma unroll
    for (int j = 0; j < D / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = row0 + g + (e >> 1) * 8;
            T *p = out + (int64_t)r * ts + j * 8 + 2 * t + (e & 1);
            if (r >= n) continue;
            if (accumulate) af_acc(p, acc[j][e]);
            else af_put(p, 0.0f + acc[j][e]);
        }
}

/* One head's K and V into shared memory as bf16 [Tk16][D+8] each (af_smem bytes), zero past Tk, by
 * the whole block (the kernels that run a warp per 16 query rows: the forward and dq). */
template <int D, class T>
__device__ static inline void af_stage_kv(unsigned char *smem, const T *k, const T *v, const am_strides &s, int b, int h,
                                          int Tk, const bf16 **Ks, const bf16 **Vs) {
    const int TkP = am_r16(Tk);
    bf16 *kd = (bf16 *)smem, *vd = (bf16 *)(smem + am_al((size_t)TkP * (D + 8) * 2));
    am_load<D, T>(kd, k + b * s.k[0] + h * s.k[1], s.k[2], 0, TkP, Tk, threadIdx.x, blockDim.x);
    am_load<D, T>(vd, v + b * s.v[0] + h * s.v[1], s.v[2], 0, TkP, Tk, threadIdx.x, blockDim.x);
    __syncthreads();
    *Ks = kd, *Vs = vd;
}

template <int D, class T>
__global__ void __launch_bounds__(AM_WARPS * 32)
k_af_fwd(int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, am_strides s, T *o, float *lse) {
    ER_DYNAMIC_SMEM(smem);
    const int TkP = am_r16(Tk);
    const int bh = blockIdx.y, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * AM_ROWS + warp * 16, g = lane >> 2, t = lane & 3;
    const bf16 *Ks, *Vs;
    af_stage_kv<D, T>(smem, k, v, s, b, h, Tk, &Ks, &Vs);
    if (row0 >= Tq) return; /* the whole warp; nothing below synchronises the block */
    const bool live0 = row0 + g < Tq, live1 = row0 + g + 8 < Tq;
    uint32_t qa[D / 16][4];
    af_rows_a<D, T>(qa, q + b * s.q[0] + h * s.q[1], s.q[2], row0, Tq, g, t);
    float oacc[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* rows g, g + 8; l: this lane's part */
    constexpr int NB = 4; /* 16-key sub-blocks per step: one max, one rescale per 64 keys */
    for (int j0 = 0; j0 < TkP; j0 += 16 * NB) {
        const int nb = (TkP - j0) / 16 < NB ? (TkP - j0) / 16 : NB; /* TkP is a multiple of 16 */
        float sc[2 * NB][4]; /* n-tile u: keys j0 + 8 u + 2t (+1); past the last 16-key tile: masked below */
#pragma unroll
        for (int u = 0; u < 2 * NB; u++) sc[u][0] = sc[u][1] = sc[u][2] = sc[u][3] = 0.0f;
#pragma unroll
        for (int w = 0; w < NB; w++) {
            if (w >= nb) break;
            af_tile_nt<D>(sc + 2 * w, qa, Ks, j0 + 16 * w, lane);
        }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int u = 0; u < 2 * NB; u++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = j0 + 8 * u + 2 * t + (e & 1);
                sc[u][e] = j < Tk ? scale * sc[u][e] : -INFINITY;
                if (e < 2) mx0 = fmaxf(mx0, sc[u][e]);
                else mx1 = fmaxf(mx1, sc[u][e]);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1); /* key j0 < Tk: finite */
        const float c0 = m0 == -INFINITY ? 0.0f : expf(m0 - n0), c1 = m1 == -INFINITY ? 0.0f : expf(m1 - n1);
        m0 = n0, m1 = n1;
        l0 *= c0, l1 *= c1;
#pragma unroll
        for (int n = 0; n < D / 8; n++) oacc[n][0] *= c0, oacc[n][1] *= c0, oacc[n][2] *= c1, oacc[n][3] *= c1;
#pragma unroll
        for (int u = 0; u < 2 * NB; u++)
#pragma unroll
            for (int e = 0; e < 4; e++) { /* P in place of S */
                sc[u][e] = sc[u][e] == -INFINITY ? 0.0f : expf(sc[u][e] - (e < 2 ? n0 : n1));
                if (e < 2) l0 += sc[u][e];
                else l1 += sc[u][e];
            }
#pragma unroll
        for (int w = 0; w < NB; w++) {
            if (w >= nb) break;
            uint32_t pa[4]; /* n-tiles 2w and 2w + 1: P's A fragment for keys j0 + 16 w .. + 16 */
            af_acc_to_a(pa, sc + 2 * w);
            af_tile_nn<D>(oacc, pa, Vs, j0 + 16 * w, lane); /* O += P V */
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    T *ob = o + b * s.o[0] + h * s.o[1];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = row0 + g + (e >> 1) * 8;
            if (r < Tq) af_put(ob + (int64_t)r * s.o[2] + n * 8 + 2 * t + (e & 1), oacc[n][e] / (e < 2 ? l0 : l1));
        }
    if (t == 0) {
        if (live0) lse[(int64_t)bh * Tq + row0 + g] = m0 + logf(l0);
        if (live1) lse[(int64_t)bh * Tq + row0 + g + 8] = m1 + logf(l1);
    }
}

template <int D, class T>
__global__ void __launch_bounds__(AM_WARPS * 32)
k_af_dkv(int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const T *o, const T *go,
         const float *lse, am_strides s, T *gk, T *gv, bool accumulate) {
    ER_DYNAMIC_SMEM(smem);
    const int TqP = am_r16(Tq);
    const int bh = blockIdx.y, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int k0 = blockIdx.x * AM_ROWS + warp * 16, g = lane >> 2, t = lane & 3;
    const size_t rows = am_al((size_t)TqP * (D + 8) * 2);
    bf16 *Qs = (bf16 *)smem, *Gs = (bf16 *)(smem + rows);
    float *Ls = (float *)(smem + 2 * rows), *Dl = Ls + TqP;
    const T *gob = go + b * s.go[0] + h * s.go[1], *ob = o + b * s.o[0] + h * s.o[1];
    am_load<D, T>(Qs, q + b * s.q[0] + h * s.q[1], s.q[2], 0, TqP, Tq, threadIdx.x, blockDim.x);
    am_load<D, T>(Gs, gob, s.go[2], 0, TqP, Tq, threadIdx.x, blockDim.x);
    for (int i = warp; i < TqP; i += AM_WARPS) { /* warp-uniform: af_delta needs the whole warp */
        const float dl = i < Tq ? af_delta<D, T>(gob + (int64_t)i * s.go[2], ob + (int64_t)i * s.o[2], lane) : 0.0f;
        if (lane == 0) {
            Dl[i] = dl;
            Ls[i] = i < Tq ? lse[(int64_t)bh * Tq + i] : INFINITY; /* P = 0 in padded query columns */
        }
    }
    __syncthreads();
    if (k0 >= Tk) return; /* the whole warp; nothing below synchronises the block */
    uint32_t ka[D / 16][4], va[D / 16][4];
    af_rows_a<D, T>(ka, k + b * s.k[0] + h * s.k[1], s.k[2], k0, Tk, g, t);
    af_rows_a<D, T>(va, v + b * s.v[0] + h * s.v[1], s.v[2], k0, Tk, g, t);
    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    for (int i0 = 0; i0 < TqP; i0 += 16) {
        float st[2][4], dpt[2][4]; /* S^T and dP^T: keys g (+ 8), queries i0 + 8u + 2t (+1) */
        af_tile_nt<D>(st, ka, Qs, i0, lane);
        af_tile_nt<D>(dpt, va, Gs, i0, lane);
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = i0 + 8 * u + 2 * t + (e & 1);
                const float p = expf(scale * st[u][e] - Ls[i]);
                st[u][e] = p;
                dpt[u][e] = scale * p * (dpt[u][e] - Dl[i]);
            }
        uint32_t pa[4], da[4];
        af_acc_to_a(pa, st);
        af_acc_to_a(da, dpt);
        af_tile_nn<D>(dv, pa, Gs, i0, lane); /* dV += P^T dO */
        af_tile_nn<D>(dk, da, Qs, i0, lane); /* dK += dS^T Q */
    }
    if (gv) af_store_acc<D, T>(gv + b * s.gv[0] + h * s.gv[1], s.gv[2], k0, Tk, dv, g, t, accumulate);
    if (gk) af_store_acc<D, T>(gk + b * s.gk[0] + h * s.gk[1], s.gk[2], k0, Tk, dk, g, t, accumulate);
}

template <int D, class T>
__global__ void __launch_bounds__(AM_WARPS * 32)
k_af_dq(int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const T *o, const T *go,
        const float *lse, am_strides s, T *gq, bool accumulate) {
    ER_DYNAMIC_SMEM(smem);
    const int TkP = am_r16(Tk);
    const int bh = blockIdx.y, b = bh / H, h = bh % H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row0 = blockIdx.x * AM_ROWS + warp * 16, g = lane >> 2, t = lane & 3;
    const bf16 *Ks, *Vs;
    af_stage_kv<D, T>(smem, k, v, s, b, h, Tk, &Ks, &Vs);
    if (row0 >= Tq) return;
    const T *gob = go + b * s.go[0] + h * s.go[1], *ob = o + b * s.o[0] + h * s.o[1];
    uint32_t qa[D / 16][4], ga[D / 16][4];
    af_rows_a<D, T>(qa, q + b * s.q[0] + h * s.q[1], s.q[2], row0, Tq, g, t);
    af_rows_a<D, T>(ga, gob, s.go[2], row0, Tq, g, t);
    float dl0 = 0.0f, dl1 = 0.0f; /* delta of rows g and g + 8 */
    for (int r = 0; r < 16 && row0 + r < Tq; r++) {
        const float x = af_delta<D, T>(gob + (int64_t)(row0 + r) * s.go[2], ob + (int64_t)(row0 + r) * s.o[2], lane);
        if (r == g) dl0 = x;
        if (r == g + 8) dl1 = x;
    }
    const float ls0 = row0 + g < Tq ? lse[(int64_t)bh * Tq + row0 + g] : 0.0f;
    const float ls1 = row0 + g + 8 < Tq ? lse[(int64_t)bh * Tq + row0 + g + 8] : 0.0f;
    float dq[D / 8][4];
#pragma unroll
    for (int n = 0; n < D / 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    for (int j0 = 0; j0 < TkP; j0 += 16) {
        float sc[2][4], dp[2][4]; /* queries g (+ 8), keys j0 + 8u + 2t (+1) */
        af_tile_nt<D>(sc, qa, Ks, j0, lane);
        af_tile_nt<D>(dp, ga, Vs, j0, lane);
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = j0 + 8 * u + 2 * t + (e & 1);
                const float p = j < Tk ? expf(scale * sc[u][e] - (e < 2 ? ls0 : ls1)) : 0.0f;
                dp[u][e] = scale * p * (dp[u][e] - (e < 2 ? dl0 : dl1));
            }
        uint32_t da[4];
        af_acc_to_a(da, dp);
        af_tile_nn<D>(dq, da, Ks, j0, lane); /* dQ += dS K */
    }
    af_store_acc<D, T>(gq + b * s.gq[0] + h * s.gq[1], s.gq[2], row0, Tq, dq, g, t, accumulate);
}

/* ---- launches ---- */
template <int D, class T>
static void af_fwd(int B, int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const am_strides &s,
                   T *o, float *lse) {
    static size_t optin = 0;
    const size_t smem = af_smem(Tk, D);
    if (!am_smem_optin(k_af_fwd<D, T>, smem, &optin)) return;
    dim3 grid((Tq + AM_ROWS - 1) / AM_ROWS, B * H);
    k_af_fwd<D, T><<<grid, AM_WARPS * 32, smem, cuda_stream()>>>(H, Tq, Tk, scale, q, k, v, s, o, lse);
    CUDA_LAUNCHED("attention (tensor cores, flash forward)");
}

template <int D, class T>
static void af_bwd(int B, int H, int Tq, int Tk, float scale, const T *q, const T *k, const T *v, const T *o,
                   const T *go, const float *lse, const am_strides &s, T *gq, T *gk, T *gv, bool accumulate) {
    static size_t optin_dq = 0, optin_dkv = 0;
    cudaStream_t st = cuda_stream();
    if (gk || gv) {
        const size_t smem = 2 * am_al((size_t)am_r16(Tq) * (D + 8) * 2) + (size_t)2 * am_r16(Tq) * 4;
        if (!am_smem_optin(k_af_dkv<D, T>, smem, &optin_dkv)) return;
        dim3 grid((Tk + AM_ROWS - 1) / AM_ROWS, B * H);
        k_af_dkv<D, T><<<grid, AM_WARPS * 32, smem, st>>>(H, Tq, Tk, scale, q, k, v, o, go, lse, s, gk, gv, accumulate);
        CUDA_LAUNCHED("attention_backward dk/dv (tensor cores, flash)");
    }
    if (gq) {
        const size_t smem = af_smem(Tk, D);
        if (!am_smem_optin(k_af_dq<D, T>, smem, &optin_dq)) return;
        dim3 grid((Tq + AM_ROWS - 1) / AM_ROWS, B * H);
        k_af_dq<D, T><<<grid, AM_WARPS * 32, smem, st>>>(H, Tq, Tk, scale, q, k, v, o, go, lse, s, gq, accumulate);
        CUDA_LAUNCHED("attention_backward dq (tensor cores, flash)");
    }
}

#define AF_FWD(DD) af_fwd<DD>(B, H, Tq, Tk, scale, q, k, v, s, o, lse)
#define AF_BWD(DD) af_bwd<DD>(B, H, Tq, Tk, scale, q, k, v, o, go, lse, s, gq, gk, gv, accumulate)

void cu_attention_flash_fwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const float *k,
                            const float *v, const am_strides &s, float *o, float *lse) {
    AM_HEAD_DIMS(AF_FWD)
}
void cu_attention_flash_fwd(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const uint16_t *k,
                            const uint16_t *v, const am_strides &s, uint16_t *o, float *lse) {
    AM_HEAD_DIMS(AF_FWD)
}
void cu_attention_flash_bwd(int B, int H, int Tq, int Tk, int D, float scale, const float *q, const float *k,
                            const float *v, const float *o, const float *go, const float *lse, const am_strides &s,
                            float *gq, float *gk, float *gv, bool accumulate) {
    AM_HEAD_DIMS(AF_BWD)
}
void cu_attention_flash_bwd(int B, int H, int Tq, int Tk, int D, float scale, const uint16_t *q, const uint16_t *k,
                            const uint16_t *v, const uint16_t *o, const uint16_t *go, const float *lse,
                            const am_strides &s, uint16_t *gq, uint16_t *gk, uint16_t *gv, bool accumulate) {
    AM_HEAD_DIMS(AF_BWD)
}
