/* gemm_ex.c — cpu_gemm_ex, the CPU reference of the gemm_ex op (kernels/gemm_ex_args.h): the product
 * through sgemm (or the prepacked weight), then the bias, then beta C, each added in one pass in
 * that order, so a linear layer + residual add is bit-identical to the separate passes it replaces.
 * The product's precision is `compute`, as the caller gave it; operands other than fp32 storage are
 * a caller bug until bf16 tensors exist (#27). The bias-gradient epilogue is cpu_sum_to of A itself. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/gemm.h"

void cpu_gemm_ex(const gemm_ex_args *a) {
    if (a->a_type != GEMM_F32 || a->b_type != GEMM_F32 || a->c_type != GEMM_F32 || a->d_type != GEMM_F32 ||
        (a->compute != GEMM_COMPUTE_FP32 && a->compute != GEMM_COMPUTE_BF16)) {
        fprintf(stderr, "endoret: cpu_gemm_ex: operand types %d/%d/%d/%d, compute %d: only fp32 storage and fp32 / "
                        "bf16 compute are implemented\n", a->a_type, a->b_type, a->c_type, a->d_type, a->compute);
        abort();
    }
    if (a->bias_grad && !(a->transA && a->lda == a->m && a->alpha == 1.0f && !a->bias)) {
        fprintf(stderr, "endoret: cpu_gemm_ex: the bias-gradient epilogue needs transA, a packed A, alpha 1 and no bias\n");
        abort();
    }
    if (a->bias_grad && a->m > 0) { /* the column sums of the stored A [k, m] */
        int64_t xs[2] = {a->k, a->m}, ys[2] = {1, a->m};
        cpu_sum_to(2, xs, a->A, ys, a->bias_grad, 1, a->work);
    }
    if (a->m <= 0 || a->n <= 0) return;
    const int m = a->m, n = a->n, prec = sgemm_precision_of(a->compute);
    /* C the same matrix as D (an accumulating product): sgemm's own beta, then the bias */
    const int alias = a->C && a->C == a->D;
    const float beta0 = alias ? a->beta : 0.0f;
    if (a->packed_b)
        sgemm_with_packed_b(prec, a->transA, a->transB, m, n, a->k, a->alpha, a->A, a->lda, a->B, a->ldb, a->packed_b, beta0,
                            a->D, a->ldd);
    else
        sgemm(prec, a->transA, a->transB, m, n, a->k, a->alpha, a->A, a->lda, a->B, a->ldb, beta0, a->D, a->ldd);
    const float *bias = a->bias, *C = alias ? NULL : a->C;
    if (!bias && !C) return;
    const float beta = a->beta;
#pragma omp parallel for schedule(static) if ((long)m * n > 65536)
    for (int i = 0; i < m; i++) {
        float *d = a->D + (size_t)i * a->ldd;
        if (bias)
            for (int j = 0; j < n; j++) d[j] = d[j] + bias[j];
        if (C) {
            const float *c = C + (size_t)i * a->ldc;
            if (beta == 1.0f)
                for (int j = 0; j < n; j++) d[j] = c[j] + d[j];
            else
                for (int j = 0; j < n; j++) d[j] = beta * c[j] + d[j];
        }
    }
}
