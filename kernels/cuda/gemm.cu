/* gemm.cu — batched, strided matrix products through cuBLAS, honouring the row-major contract of
 * kernels/gemm.h (sgemm_strided_batched is the CPU function this mirrors).
 *
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a row-major matrix read as
 * column-major is its transpose; so the call swaps A<->B and m<->n and keeps the trans flags and
 * leading dimensions as they are.
 *
 * Precision (`compute`, given by the caller on every call): GEMM_COMPUTE_FP32 uses CUBLAS_COMPUTE_32F
 * (true fp32, no TF32); GEMM_COMPUTE_BF16 uses
 * CUBLAS_COMPUTE_32F_FAST_16BF: inputs rounded to bf16 on the fly, tensor-core products, fp32
 * accumulation, fp32 storage (no extra copies). Measured on an H100 (bench/RESULTS_cuda.md): a
 * separate pass rounding A and B to bf16 followed by a bf16 x bf16 product was slower on every ViT
 * layer (fc2 of ViT-B/16: 0.355 ms against 0.148): with fp32 activations the pass moves more bytes
 * than the faster product saves. Only bf16 activations end to end would gain. */
#include <cublas_v2.h>
#include <stdio.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_kernels.h"

void cu_gemm_batched(int compute, int transA, int transB, int m, int n, int k, float alpha, const float *A,
                     int lda, long strideA, const float *B, int ldb, long strideB, float beta,
                     float *C, int ldc, long strideC, int batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    cublasHandle_t h = cuda_cublas();
    if (!h) {
        cuda_record_msg("gemm: no cuBLAS handle (no CUDA device)", __FILE__, __LINE__);
        return;
    }
    cublasComputeType_t ct = compute == GEMM_COMPUTE_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, B,
        CUDA_R_32F, ldb, (long long)strideB, A, CUDA_R_32F, lda, (long long)strideA, &beta, C,
        CUDA_R_32F, ldc, (long long)strideC, batch, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char msg[200];
        snprintf(msg, sizeof msg, "cublasGemmStridedBatchedEx(m=%d n=%d k=%d batch=%d): %s", m, n, k,
                 batch, cublasGetStatusString(st));
        cuda_record_msg(msg, __FILE__, __LINE__);
    }
}

/* cuBLAS keeps no packed form of an operand: a frozen weight is read as it is (ops.def). */
void cu_gemm_prepack(int compute, int transB, int k, int n, const float *B, int ldb, void **out) { *out = NULL; }

void cu_gemm_prepack_free(void *packed) {}

void cu_gemm_prepacked(int compute, int transA, int transB, int m, int n, int k, float alpha,
                       const float *A, int lda, const float *B, int ldb, const void *packed, float beta,
                       float *C, int ldc) {
    cu_gemm_batched(compute, transA, transB, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
