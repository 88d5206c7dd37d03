/* cast.cu — fp32 <-> bf16 conversion and the strided bf16 copy. Mirrors kernels/cpu/cast.c
 * (cpu_cast, cpu_copy_strided_bf16): the same integer rounding as kernels/dtype.h's
 * er_f32_to_bf16 (round to nearest even on the bit pattern, NaN kept quiet, subnormals kept), not
 * __float2bfloat16_rn, so both backends give the same bits by construction, except the payload of a
 * NaN that an accumulating add makes (the GPU's add returns its canonical NaN, x86 an operand's). Strided operands are
 * coalesced on the host like cu_copy_strided. */
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

#define CAST_THREADS 256

#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void k_cast(int64_t n, int from, const void *x, int to, void *y, int accumulate) {
    GRID_STRIDE(i, n) {
        float v = cu_load_f32(from, x, i);
        if (accumulate) v = cu_load_f32(to, y, i) + v;
        if (to == ER_BF16) ((uint16_t *)y)[i] = cu_f32_to_bf16(v);
        else ((float *)y)[i] = v;
    }
}

void cu_cast(int64_t n, int from, const void *x, int to, void *y, int accumulate) {
    if (n <= 0) return;
    k_cast<<<cuda_blocks(n, CAST_THREADS), CAST_THREADS, 0, cuda_stream()>>>(n, from, x, to, y, accumulate);
    CUDA_LAUNCHED("cast");
}

__global__ void k_cast_strided(cu_index ix, int64_t n, int from, const void *x, int to, void *y, int accumulate) {
    GRID_STRIDE(e, n) {
        int64_t off[2];
        cu_offsets<2>(ix, e, off);
        float v = cu_load_f32(from, x, off[0]);
        if (accumulate) v = cu_load_f32(to, y, off[1]) + v;
        cu_store_f32(to, y, off[1], v);
    }
}

void cu_cast_strided(int ndim, const int64_t *shape, int from, const void *x, const int64_t *xs, int to, void *y,
                     const int64_t *ys, int accumulate) {
    int64_t n = cu_numel(ndim, shape);
    if (n <= 0) return;
    const int64_t *st[2] = {xs, ys};
    cu_index ix = cu_index_make(ndim, shape, st, 2);
    k_cast_strided<<<cuda_blocks(n, CAST_THREADS), CAST_THREADS, 0, cuda_stream()>>>(ix, n, from, x, to, y, accumulate);
    CUDA_LAUNCHED("cast_strided");
}

__global__ void k_copy_strided_bf16(cu_index ix, int64_t n, const uint16_t *x, uint16_t *y, int accumulate) {
    GRID_STRIDE(e, n) {
        int64_t off[2];
        cu_offsets<2>(ix, e, off);
        uint16_t v = x[off[0]];
        y[off[1]] = accumulate ? cu_f32_to_bf16(cu_bf16_to_f32(y[off[1]]) + cu_bf16_to_f32(v)) : v;
    }
}

/* two packed bf16: round(a + b) each, the accumulation of k_copy_strided_bf16 */
__device__ __forceinline__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
    const uint16_t lo = cu_f32_to_bf16(cu_bf16_to_f32((uint16_t)(a & 0xFFFFu)) + cu_bf16_to_f32((uint16_t)(b & 0xFFFFu)));
    const uint16_t hi = cu_f32_to_bf16(cu_bf16_to_f32((uint16_t)(a >> 16)) + cu_bf16_to_f32((uint16_t)(b >> 16)));
    return (uint32_t)lo | ((uint32_t)hi << 16);
}

/* 8 elements (16 bytes) at a time, where the innermost (coalesced) dim is contiguous on both sides
 * and every chunk of 8 starts 16-byte aligned (a head split or merge of attention: the innermost dim
 * is the head's 64 channels): ix counts chunks, its offsets are in elements. One index computation
 * per 8 elements instead of per element, and 16-byte accesses. */
__global__ void k_copy_strided_bf16_x8(cu_index ix, int64_t n8, const uint4 *x, uint4 *y, int accumulate) {
    GRID_STRIDE(e, n8) {
        int64_t off[2];
        cu_offsets<2>(ix, e, off);
        uint4 v = x[off[0] >> 3];
        if (accumulate) {
            const uint4 o = y[off[1] >> 3];
            v = make_uint4(bf16x2_add(o.x, v.x), bf16x2_add(o.y, v.y), bf16x2_add(o.z, v.z), bf16x2_add(o.w, v.w));
        }
        y[off[1] >> 3] = v;
    }
}

/* ix viewed in chunks of 8 elements, if it can be (see k_copy_strided_bf16_x8) */
static bool chunks_of_8(cu_index &ix, const void *x, const void *y) {
    const int last = ix.ndim - 1;
    if (((uintptr_t)x | (uintptr_t)y) & 15) return false;
    if (ix.st[0][last] != 1 || ix.st[1][last] != 1 || ix.shape[last] % 8) return false;
    for (int d = 0; d < last; d++)
        if (ix.st[0][d] % 8 || ix.st[1][d] % 8) return false;
    ix.shape[last] /= 8;
    ix.st[0][last] = ix.st[1][last] = 8;
    return true;
}

void cu_copy_strided_bf16(int ndim, const int64_t *shape, const uint16_t *x, const int64_t *xs, uint16_t *y,
                          const int64_t *ys, int accumulate) {
    int64_t n = cu_numel(ndim, shape);
    if (n <= 0) return;
    const int64_t *st[2] = {xs, ys};
    cu_index ix = cu_index_make(ndim, shape, st, 2);
    if (chunks_of_8(ix, x, y)) {
        k_copy_strided_bf16_x8<<<cuda_blocks(n / 8, CAST_THREADS), CAST_THREADS, 0, cuda_stream()>>>(
            ix, n / 8, (const uint4 *)x, (uint4 *)y, accumulate);
    } else {
        k_copy_strided_bf16<<<cuda_blocks(n, CAST_THREADS), CAST_THREADS, 0, cuda_stream()>>>(ix, n, x, y, accumulate);
    }
    CUDA_LAUNCHED("copy_strided_bf16");
}
