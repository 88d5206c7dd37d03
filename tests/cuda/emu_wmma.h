/* emu_wmma.h — host stand-ins for the bf16 type (cuda_bf16.h) and the warp matrix functions
 * (mma.h, nvcuda::wmma) that kernels/cuda/attention_mma.cu uses, and for the two PTX instructions
 * of attention_flash.cu (mma.sync m16n8k16 and ldmatrix x4, lane by lane: the end of this file);
 * included by emu_cuda.h.
 *
 * Model: on a GPU a fragment's elements are spread over the 32 lanes of a warp in an unspecified
 * order, so correct code only loads, stores, fills and multiplies whole fragments. Here every
 * emulated thread holds the whole 16x16 tile and does the whole product itself (32 identical
 * copies per warp): a kernel that depends on which lane holds which element, or that lets one
 * warp's lanes diverge around a fragment call, is still wrong on the GPU, and that this cannot
 * show. What it does check: tile offsets, leading dimensions, row/column-major choices, operand
 * order, bf16 rounding of the inputs and fp32 accumulation.
 * Stores from the 32 copies write the same values to the same addresses; the warp barrier that
 * follows (__syncwarp) orders them for the readers. */
#ifndef ENDORET_EMU_WMMA_H
#define ENDORET_EMU_WMMA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cuda_bf16.h: storage type and the two conversions (round to nearest even) ---- */
struct __nv_bfloat16 {
    uint16_t bits;
};
static inline __nv_bfloat16 __float2bfloat16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    __nv_bfloat16 r;
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) r.bits = (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    else r.bits = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return r;
}
static inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.bits << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- mma.h ---- */
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    g_emu_block->warp_bar[t_linear >> 5]->arrive_and_wait();
}

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    enum { rows = std::is_same<Use, matrix_b>::value ? K : M, cols = std::is_same<Use, matrix_a>::value ? K : N };
    enum { num_elements = rows * cols };
    T x[num_elements]; /* row-major, the whole tile in every thread */
};

template <class T> static inline float emu_wmma_f(T v) { return (float)v; }
template <> inline float emu_wmma_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class Use, int M, int N, int K, class T, class L>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, T v) {
    for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}

/* matrix_a / matrix_b: the layout is the fragment's type; ldm in elements. */
template <class Use, int M, int N, int K, class T, class L>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const T *p, unsigned ldm) {
    typedef fragment<Use, M, N, K, T, L> F;
    if ((uintptr_t)p % 32) abort(); /* the hardware requires 256-bit aligned tiles */
    for (int r = 0; r < F::rows; r++)
        for (int c = 0; c < F::cols; c++)
            f.x[r * F::cols + c] = std::is_same<L, row_major>::value ? p[(size_t)r * ldm + c] : p[r + (size_t)c * ldm];
}

template <int M, int N, int K, class T>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, const T *p, unsigned ldm, layout_t l) {
    if ((uintptr_t)p % 32) abort();
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) f.x[r * N + c] = l == mem_row_major ? p[(size_t)r * ldm + c] : p[r + (size_t)c * ldm];
}

template <int M, int N, int K, class T>
static inline void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T> &f, unsigned ldm, layout_t l) {
    if ((uintptr_t)p % 32) abort();
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            T *d = l == mem_row_major ? p + (size_t)r * ldm + c : p + r + (size_t)c * ldm;
            *d = f.x[r * N + c];
        }
}

/* d = a b + c, fp32 accumulation in k order (the GPU's order is unspecified) */
template <int M, int N, int K, class TA, class LA, class LB>
static inline void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, TA, LA> &a,
                            const fragment<matrix_b, M, N, K, TA, LB> &b, const fragment<accumulator, M, N, K, float> &c) {
    float out[M * N];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = c.x[i * N + j];
            for (int k = 0; k < K; k++) s += emu_wmma_f(a.x[i * K + k]) * emu_wmma_f(b.x[k * N + j]);
            out[i * N + j] = s;
        }
    memcpy(d.x, out, sizeof out);
}
} // namespace wmma
} // namespace nvcuda

/* ---- mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, lane by lane ----
 * Unlike the wmma stand-in above, this keeps the PTX fragment layout (groupID g = lane / 4, t = lane % 4;
 * the lower 16 bits of a register hold the lower-index element):
 *   A 16x16 row-major: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
 *   B 16x8 (k x n):    b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
 *   C/D 16x8 fp32:     c[0], c[1] = D[g][2t, 2t+1], c[2], c[3] = D[g+8][2t, 2t+1]
 * Every lane publishes its registers, the warp meets at a barrier, and each lane rebuilds A and B
 * from all 32 and computes its own four outputs: a kernel that puts an element in the wrong
 * register or lane gets a wrong product here, as on the GPU. fp32 accumulation in k order. */
static inline void emu_warp_gather(uint64_t v, uint64_t *all) {
    int warp = t_linear >> 5, base = warp * 32;
    g_emu_block->slots[t_linear] = v;
    g_emu_block->warp_bar[warp]->arrive_and_wait();
    for (int i = 0; i < 32; i++) all[i] = g_emu_block->slots[base + i];
    g_emu_block->warp_bar[warp]->arrive_and_wait();
}
static inline float emu_bf16_lo(uint64_t w, int half) { /* element `half` (0..3) of a 64-bit slot */
    uint32_t u = (uint32_t)((w >> (16 * half)) & 0xFFFFu) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline void emu_mma_m16n8k16_bf16(float *c, const uint32_t *a, const uint32_t *b) {
    uint64_t a01[32], a23[32], b01[32];
    emu_warp_gather((uint64_t)a[0] | (uint64_t)a[1] << 32, a01);
    emu_warp_gather((uint64_t)a[2] | (uint64_t)a[3] << 32, a23);
    emu_warp_gather((uint64_t)b[0] | (uint64_t)b[1] << 32, b01);
    float A[16][16], B[16][8];
    for (int L = 0; L < 32; L++) {
        int g = L >> 2, t = L & 3;
        for (int e = 0; e < 2; e++) {
            A[g][2 * t + e] = emu_bf16_lo(a01[L], e);
            A[g + 8][2 * t + e] = emu_bf16_lo(a01[L], 2 + e);
            A[g][2 * t + 8 + e] = emu_bf16_lo(a23[L], e);
            A[g + 8][2 * t + 8 + e] = emu_bf16_lo(a23[L], 2 + e);
            B[2 * t + e][g] = emu_bf16_lo(b01[L], e);
            B[2 * t + 8 + e][g] = emu_bf16_lo(b01[L], 2 + e);
        }
    }
    int lane = t_linear & 31, g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >> 1) * 8, col = 2 * t + (i & 1);
        float s = c[i];
        for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
        c[i] = s;
    }
}


/* ---- ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16, lane by lane ----
 * Lanes 8m .. 8m + 7 give the addresses of the 8 rows (8 b16 each, 16-byte aligned) of matrix m;
 * register m of lane L then holds, of matrix m, elements (L / 4, 2 (L % 4)) and (L / 4, 2 (L % 4) + 1),
 * lower column in the lower 16 bits; with .trans the transposed matrix's: (2 (L % 4), L / 4) and
 * (2 (L % 4) + 1, L / 4). Every lane publishes its address and reads the rows the others named, so
 * a kernel that gives a wrong row address, or expects another register order, gets wrong
 * fragments here as on the GPU. A misaligned row address aborts (the GPU faults). */
static inline void emu_ldmatrix_x4(uint32_t *r, const void *addr, bool trans) {
    uint64_t all[32];
    emu_warp_gather((uint64_t)(uintptr_t)addr, all);
    const int lane = t_linear & 31, g = lane >> 2, t = lane & 3;
    for (int m = 0; m < 4; m++) {
        uint16_t e[2];
        for (int j = 0; j < 2; j++) {
            const int row = trans ? 2 * t + j : g, col = trans ? g : 2 * t + j;
            const uint64_t a = all[8 * m + row];
            if (a % 16) {
                fprintf(stderr, "emulated ldmatrix: row address %p not 16-byte aligned\n", (void *)(uintptr_t)a);
                abort();
            }
            memcpy(&e[j], (const char *)(uintptr_t)a + 2 * col, 2);
        }
        r[m] = (uint32_t)e[0] | (uint32_t)e[1] << 16;
    }
}

#endif
