/* gemm_ex_args.h — the argument of the gemm_ex op (kernels/ops.def): one matrix product with its
 * epilogue, so a linear layer's bias and the residual stream's add ride in the GEMM instead of
 * taking two more passes over the output (cuBLASLt's bias epilogue and C operand on CUDA).
 *
 * Row-major, as sgemm (kernels/gemm.h):
 *     D[m,n] = alpha op(A) op(B) + beta C + bias[n]
 *   op(A) m x k (A stored k x m when transA), op(B) k x n (B stored n x k when transB);
 *   C (ldc) may be NULL (no C term) and may be D itself; bias [n] may be NULL.
 * The order of the additions is fixed for the CPU reference: the product is rounded to fp32, then
 * the bias is added, then beta C (so a linear layer followed by a residual add gives the same bits
 * as the three separate passes it replaces). cuBLASLt adds them in its own order (within fp32
 * rounding of that).
 * Storage types (issue #27): A and B are GEMM_F32 or GEMM_BF16 each (a_type, b_type), C and D
 * likewise (c_type, d_type); the pointers are untyped and read as those types say. bias is fp32.
 * `compute` is the product's arithmetic, given by the caller: GEMM_COMPUTE_FP32 (true fp32) or
 * GEMM_COMPUTE_BF16 (inputs rounded to bf16, fp32 accumulation). A bf16 A or B requires
 * GEMM_COMPUTE_BF16 (its values are bf16 already: the rounding is exact, so a bf16-stored operand
 * gives the bits of its fp32-stored copy). Accumulation is fp32 always; a bf16 C is widened
 * (exactly); a bf16 D is the fp32 result above (after bias and beta C, in that order) rounded
 * once to nearest even (kernels/dtype.h's er_f32_to_bf16).
 * `work`: a bf16 D (C = D included) needs m * n floats of the caller's scratch (row stride n) for
 * the fp32 result before its one rounding (gemm_ex_work_floats; the CPU always, CUDA when its split
 * path runs). CUDA: A and B of one type (a mixed pair is refused).
 * `packed_b` (may be NULL): B's prepacked copy from gemm_prepack (CPU inference, fp32 B only: a
 * bf16 B is packed per call; CUDA ignores it).
 *
 * The bias-gradient epilogue (a weight-gradient product dW = dY^T X of a linear layer, whose bias
 * gradient is the column sums of dY = op(A)^T): `bias_grad` [m] (+)= the sums over k of op(A)'s
 * rows, exactly sum_to of the stored A [k, m] -> [1, m] with accumulate (so the CPU gives the bits
 * of the separate sum_to it replaces; cuBLASLt's BGRADB epilogue on CUDA, which reads dY while the
 * product does instead of once more). Only with transA = 1, A packed (lda == m), alpha 1 and no
 * bias, and every operand fp32; `work`: sum_to_workspace({k, m}, {1, m}) floats of the caller's
 * scratch (may be NULL when 0). */
#ifndef ENDORET_GEMM_EX_ARGS_H
#define ENDORET_GEMM_EX_ARGS_H

#ifdef __cplusplus
extern "C" {
#endif

enum { GEMM_F32 = 0, GEMM_BF16 = 1 };
enum { GEMM_COMPUTE_FP32 = 0, GEMM_COMPUTE_BF16 = 1 };

typedef struct {
    int transA, transB, m, n, k;
    float alpha, beta;
    const void *A; /* a_type */
    int lda;
    const void *B; /* b_type */
    int ldb;
    const void *C; /* c_type; NULL: no C term */
    int ldc;
    void *D; /* d_type */
    int ldd;
    const float *bias; /* [n] or NULL */
    int a_type, b_type, c_type, d_type; /* GEMM_F32 or GEMM_BF16 (0 = fp32: existing callers) */
    int compute;                        /* GEMM_COMPUTE_* */
    const void *packed_b;               /* NULL, or gemm_prepack's copy of B (CPU only) */
    float *bias_grad;                   /* [m] or NULL: the bias-gradient epilogue (above) */
    float *work;                        /* its scratch, or a bf16 D's fp32 result (above) */
} gemm_ex_args;

/* Floats of `work` a call needs for a bf16 D (0 otherwise); the bias-gradient epilogue's own need
 * is sum_to_workspace's (it is fp32 only). */
static inline long gemm_ex_work_floats(const gemm_ex_args *a) {
    return a->d_type == GEMM_BF16 && a->m > 0 && a->n > 0 ? (long)a->m * a->n : 0;
}

#ifdef __cplusplus
}
#endif

#endif
