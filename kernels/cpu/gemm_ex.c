/* gemm_ex.c — cpu_gemm_ex, the CPU reference of the gemm_ex op (kernels/gemm_ex_args.h): the product
 * through sgemm (or the prepacked weight), then the bias, then beta C, each added in one pass in
 * that order, so a linear layer + residual add is bit-identical to the separate passes it replaces.
 * The product's precision is `compute`, as the caller gave it. The bias-gradient epilogue is
 * cpu_sum_to of A itself.
 *
 * Storage types (issue #27): bf16 A / B are packed from their bits (sgemm_typed), so the product is
 * the one of their widened fp32 copies; a bf16 C is widened as it is read; a bf16 D is written
 * once, rounded to nearest even from the fp32 result computed in the caller's `work` (m x n, ld n)
 * with the very passes an fp32 D gets, so it equals er_f32_to_bf16 of that fp32 D bit for bit. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/dtype.h"
#include "kernels/gemm.h"

static int storage_ok(int t) { return t == GEMM_F32 || t == GEMM_BF16; }

/* NULL when the arguments are a valid call, else what is wrong with them. */
static const char *gemm_ex_invalid(const gemm_ex_args *a) {
    if (!storage_ok(a->a_type) || !storage_ok(a->b_type) || !storage_ok(a->c_type) || !storage_ok(a->d_type))
        return "operand types must be GEMM_F32 or GEMM_BF16";
    if (a->compute != GEMM_COMPUTE_FP32 && a->compute != GEMM_COMPUTE_BF16) return "compute must be fp32 or bf16";
    if ((a->a_type == GEMM_BF16 || a->b_type == GEMM_BF16) && a->compute != GEMM_COMPUTE_BF16)
        return "a bf16 A or B needs GEMM_COMPUTE_BF16";
    if (a->bias_grad && !(a->transA && a->lda == a->m && a->alpha == 1.0f && !a->bias))
        return "the bias-gradient epilogue needs transA, a packed A, alpha 1 and no bias";
    if (a->bias_grad && (a->a_type | a->b_type | a->c_type | a->d_type) != GEMM_F32)
        return "the bias-gradient epilogue takes fp32 operands only";
    if (gemm_ex_work_floats(a) && !a->work) return "a bf16 D needs work (gemm_ex_work_floats)";
    if (a->C && a->C == a->D && a->c_type != a->d_type) return "C is D but their types differ";
    return NULL;
}

void cpu_gemm_ex(const gemm_ex_args *a) {
    const char *bad = gemm_ex_invalid(a);
    if (bad) {
        fprintf(stderr, "endoret: cpu_gemm_ex: %s (types A %d B %d C %d D %d, compute %d)\n", bad, a->a_type,
                a->b_type, a->c_type, a->d_type, a->compute);
        abort();
    }
    if (a->bias_grad && a->m > 0) { /* the column sums of the stored A [k, m] */
        int64_t xs[2] = {a->k, a->m}, ys[2] = {1, a->m};
        cpu_sum_to(2, xs, a->A, ys, a->bias_grad, 1, a->work);
    }
    if (a->m <= 0 || a->n <= 0) return;
    const int m = a->m, n = a->n, prec = sgemm_precision_of(a->compute);
    const int c16 = a->c_type == GEMM_BF16, d16 = a->d_type == GEMM_BF16;
    /* The fp32 result: D itself, or the caller's scratch before a bf16 D's one rounding. */
    float *R = d16 ? a->work : a->D;
    const long ldr = d16 ? n : a->ldd;
    /* C the same matrix as D (an accumulating product): sgemm's own beta, then the bias; a bf16 C
     * is widened into R first, so it accumulates as its fp32 copy would. */
    const int alias = a->C && a->C == a->D;
    const float beta0 = alias ? a->beta : 0.0f;
    if (alias && d16 && a->beta != 0.0f) /* C is D */
        for (int i = 0; i < m; i++)
            cpu_cast_span(n, ER_BF16, (const uint16_t *)a->C + (size_t)i * a->ldd, ER_F32, R + (size_t)i * ldr, 0);
    sgemm_typed(prec, a->transA, a->transB, m, n, a->k, a->alpha, a->A, a->a_type, a->lda, a->B, a->b_type, a->ldb,
                a->packed_b, beta0, R, (int)ldr);
    const float *bias = a->bias;
    const void *C = alias ? NULL : a->C;
    if (!bias && !C && !d16) return;
    const float beta = a->beta;
#pragma omp parallel for schedule(static) if ((long)m * n > 65536)
    for (int i = 0; i < m; i++) {
        float *r = R + (size_t)i * ldr;
        if (bias)
            for (int j = 0; j < n; j++) r[j] = r[j] + bias[j];
        if (C && !c16) {
            const float *c = (const float *)C + (size_t)i * a->ldc;
            if (beta == 1.0f)
                for (int j = 0; j < n; j++) r[j] = c[j] + r[j];
            else
                for (int j = 0; j < n; j++) r[j] = beta * c[j] + r[j];
        } else if (C) {
            const uint16_t *c = (const uint16_t *)C + (size_t)i * a->ldc;
            if (beta == 1.0f)
                cpu_cast_span(n, ER_BF16, c, ER_F32, r, 1); /* r + c: the same sum */
            else
                for (int j = 0; j < n; j++) r[j] = beta * er_bf16_to_f32(c[j]) + r[j];
        }
        if (d16) cpu_cast_span(n, ER_F32, r, ER_BF16, (uint16_t *)a->D + (size_t)i * a->ldd, 0); /* one rounding */
    }
}
