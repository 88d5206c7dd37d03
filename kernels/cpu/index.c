/* index.c — gather / scatter-add of rows of `inner` floats along an axis. */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_gather(int64_t outer, int64_t L, int64_t inner, const float *x, const int32_t *idx,
                int64_t idx_stride, int64_t K, float *y) {
    #pragma omp parallel for collapse(2) if (outer * K * inner > CPU_PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < K; j++) {
            int64_t src = idx[o * idx_stride + j];
            memcpy(y + (o * K + j) * inner, x + (o * L + src) * inner, (size_t)inner * sizeof(float));
        }
}

/* Parallel over `outer` only: two j with the same index in one o then never race. */
void cpu_scatter_add(int64_t outer, int64_t K, int64_t inner, const float *x, const int32_t *idx,
                     int64_t idx_stride, int64_t L, float *y) {
    #pragma omp parallel for if (outer * K * inner > CPU_PAR_MIN && outer > 1)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < K; j++) {
            float *dst = y + (o * L + idx[o * idx_stride + j]) * inner;
            const float *src = x + (o * K + j) * inner;
            #pragma omp simd
            for (int64_t c = 0; c < inner; c++) dst[c] += src[c];
        }
}
