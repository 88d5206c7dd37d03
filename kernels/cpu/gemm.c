/* gemm.c — PLACEHOLDER implementation (straightforward loops) so the rest of the tree links while
 * the packed AVX-512 kernel is written; replaced by the optimised version. */
#include "kernels/cpu/gemm.h"

static inline float at(const float *X, int ld, int trans, int r, int c) {
    return trans ? X[(long)c * ld + r] : X[(long)r * ld + c];
}

void sgemm_ref(int transA, int transB, int m, int n, int k, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += (double)at(A, lda, transA, i, p) * at(B, ldb, transB, p, j);
            float old = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
            C[(long)i * ldc + j] = (float)(alpha * s) + old;
        }
}

void sgemm(int transA, int transB, int m, int n, int k, float alpha, const float *A, int lda,
           const float *B, int ldb, float beta, float *C, int ldc) {
    #pragma omp parallel for if ((long)m * n * k > 100000)
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int p = 0; p < k; p++) s += at(A, lda, transA, i, p) * at(B, ldb, transB, p, j);
            float old = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
            C[(long)i * ldc + j] = alpha * s + old;
        }
}

void sgemm_strided_batched(int transA, int transB, int m, int n, int k, float alpha, const float *A,
                           int lda, long strideA, const float *B, int ldb, long strideB, float beta,
                           float *C, int ldc, long strideC, int batch) {
    for (int b = 0; b < batch; b++)
        sgemm(transA, transB, m, n, k, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
              C + b * strideC, ldc);
}
