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

void cu_copy_strided_bf16(int ndim, const int64_t *shape, const uint16_t *x, const int64_t *xs, uint16_t *y,
                          const int64_t *ys, int accumulate) {
    int64_t n = cu_numel(ndim, shape);
    if (n <= 0) return;
    const int64_t *st[2] = {xs, ys};
    cu_index ix = cu_index_make(ndim, shape, st, 2);
    k_copy_strided_bf16<<<cuda_blocks(n, CAST_THREADS), CAST_THREADS, 0, cuda_stream()>>>(ix, n, x, y, accumulate);
    CUDA_LAUNCHED("copy_strided_bf16");
}
