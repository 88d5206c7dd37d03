/* test_cuda_parity_gemm_ex.c — the gemm_ex op (a product with bias and C epilogue) of the CUDA table
 * against cpu_gemm_ex, through cuBLASLt (ENDORET_CUDA_GEMM_EX=lt, the default) and through the split
 * path (product, then one epilogue kernel): fp32 at 1e-5 and bf16 compute at 2e-2 (the tolerances of
 * test_cuda_parity.c). The cases are the ViT's: x W^T + b (qkv, fc1), x W^T + b + residual (proj,
 * fc2), no bias, the other transposes, padded leading dimensions, C = D (an accumulating
 * product), and the bias-gradient epilogue of a weight-gradient product. Skips without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "tests/cuda/parity_util.h"

/* one case: sizes, transposes, padding of every leading dimension, bias, C (0 none, 1 separate, 2 = D) */
static void gemm_ex_case(int m, int n, int k, int ta, int tb, int pad, int bias, int cmode, float alpha, float beta,
                         int bf16, uint32_t tag) {
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldd = n + pad, ldc = n + 2 * pad;
    int64_t na = (int64_t)(ta ? k : m) * lda, nb = (int64_t)(tb ? n : k) * ldb, nd = (int64_t)m * ldd, nc = (int64_t)m * ldc;
    float *A = rnd(na, -1, 1, tag), *B = rnd(nb, -1, 1, tag + 1), *b = rnd(n, -1, 1, tag + 2);
    float *C = rnd(nc, -1, 1, tag + 3), *D = rnd(nd, -1, 1, tag + 4);
    float *dA = devf(A, na), *dB = devf(B, nb), *db = devf(b, n), *dC = devf(C, nc), *dD = devf(D, nd);
    gemm_ex_args a = {.transA = ta, .transB = tb, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
                      .A = A, .lda = lda, .B = B, .ldb = ldb, .C = cmode == 1 ? C : cmode == 2 ? D : NULL,
                      .ldc = cmode == 2 ? ldd : ldc, .D = D, .ldd = ldd, .bias = bias ? b : NULL,
                      .compute = bf16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32};
    CPU->gemm_ex(&a);
    gemm_ex_args g = a;
    g.A = dA, g.B = dB, g.D = dD, g.bias = bias ? db : NULL, g.C = cmode == 1 ? dC : cmode == 2 ? dD : NULL;
    GPU->gemm_ex(&g);
    char what[160];
    snprintf(what, sizeof what, "gemm_ex %dx%dx%d t%d%d pad %d bias %d C %d %s", m, n, k, ta, tb, pad, bias, cmode,
             bf16 ? "bf16" : "fp32");
    expect_close(what, D, dD, nd, bf16 ? 2e-2 : 1e-5); /* padding columns too: untouched on both sides */
    GPU->free(dA); GPU->free(dB); GPU->free(db); GPU->free(dC); GPU->free(dD);
    free(A); free(B); free(b); free(C); free(D);
}

/* The bias-gradient epilogue of a weight-gradient product dW[n,k] += dY^T X (dY [kk, n] packed, as
 * linear's backward calls it): dW and the accumulated bias gradient (the column sums of dY) against
 * the CPU's, which is sum_to itself. */
static void bias_grad_case(int rows, int n, int k, int bf16, uint32_t tag) {
    float *dy = rnd((int64_t)rows * n, -1, 1, tag), *x = rnd((int64_t)rows * k, -1, 1, tag + 1);
    float *dw = rnd((int64_t)n * k, -1, 1, tag + 2), *g = rnd(n, -1, 1, tag + 3);
    float *ddy = devf(dy, (int64_t)rows * n), *dx = devf(x, (int64_t)rows * k), *ddw = devf(dw, (int64_t)n * k), *dg = devf(g, n);
    int64_t xs[2] = {rows, n}, ys[2] = {1, n};
    size_t wc = CPU->sum_to_workspace(2, xs, ys), wg = GPU->sum_to_workspace(2, xs, ys);
    float *work = malloc((wc ? wc : 1) * sizeof(float)), *dwork = GPU->alloc((wg ? wg : 1) * sizeof(float));
    gemm_ex_args a = {.transA = 1, .transB = 0, .m = n, .n = k, .k = rows, .alpha = 1.0f, .beta = 1.0f, .A = dy, .lda = n,
                      .B = x, .ldb = k, .C = dw, .ldc = k, .D = dw, .ldd = k, .compute = bf16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32,
                      .bias_grad = g, .work = work};
    CPU->gemm_ex(&a);
    gemm_ex_args d = a;
    d.A = ddy, d.B = dx, d.C = ddw, d.D = ddw, d.bias_grad = dg, d.work = dwork;
    GPU->gemm_ex(&d);
    char what[160];
    snprintf(what, sizeof what, "gemm_ex bias gradient %dx%dx%d %s: dW", n, k, rows, bf16 ? "bf16" : "fp32");
    expect_close(what, dw, ddw, (int64_t)n * k, bf16 ? 2e-2 : 1e-5);
    snprintf(what, sizeof what, "gemm_ex bias gradient %dx%dx%d %s: bias", n, k, rows, bf16 ? "bf16" : "fp32");
    expect_close(what, g, dg, n, 1e-5); /* the sums read dY as stored: no bf16 rounding */
    GPU->free(ddy); GPU->free(dx); GPU->free(ddw); GPU->free(dg); GPU->free(dwork);
    free(dy); free(x); free(dw); free(g); free(work);
}

static void gemm_ex_cases(void) {
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        bias_grad_case(2 * 50, 3 * 64, 64, bf16, 370); /* qkv's dW and db */
        bias_grad_case(77, 19, 33, bf16, 380);         /* odd sizes */
    }
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        gemm_ex_case(2 * 50, 3 * 64, 64, 0, 1, 0, 1, 0, 1.0f, 0.0f, bf16, 300);  /* qkv: x W^T + b */
        gemm_ex_case(2 * 50, 64, 64, 0, 1, 0, 1, 1, 1.0f, 1.0f, bf16, 310);      /* proj + residual */
        gemm_ex_case(37, 48, 80, 0, 1, 0, 0, 1, 1.0f, 1.0f, bf16, 320);          /* no bias, residual */
        gemm_ex_case(33, 40, 17, 0, 0, 3, 1, 0, 1.0f, 0.0f, bf16, 330);          /* B not transposed, padded */
        gemm_ex_case(29, 31, 23, 1, 0, 1, 1, 1, 0.5f, -2.0f, bf16, 340);         /* A transposed, alpha, beta */
        gemm_ex_case(21, 19, 45, 1, 1, 2, 0, 0, 1.0f, 0.0f, bf16, 350);          /* both transposed, plain */
        gemm_ex_case(16, 24, 32, 0, 1, 0, 1, 2, 1.0f, 1.0f, bf16, 360);          /* C = D: accumulate */
    }
}

PARITY_COVERS(gemm_ex);
Test(cuda, gemm_ex_cublaslt) {
    setenv("ENDORET_CUDA_GEMM_EX", "lt", 1);
    require_gpu();
    gemm_ex_cases();
}
Test(cuda, gemm_ex_split_path) {
    setenv("ENDORET_CUDA_GEMM_EX", "split", 1);
    require_gpu();
    gemm_ex_cases();
}
/* Another value is an error that names the variable. */
Test(cuda, gemm_ex_path_variable_is_checked) {
    setenv("ENDORET_CUDA_GEMM_EX", "fast", 1);
    require_gpu();
    if (SELFTEST) cr_skip_test("self-test: the CPU table has one gemm_ex path");
    float *d = GPU->alloc(64 * sizeof(float));
    gemm_ex_args a = {.m = 4, .n = 4, .k = 4, .alpha = 1.0f, .A = d, .lda = 4, .B = d + 16, .ldb = 4, .D = d + 32, .ldd = 4};
    GPU->gemm_ex(&a);
    GPU->synchronize();
    const char *e = GPU->last_error();
    cr_assert(e && strstr(e, "ENDORET_CUDA_GEMM_EX"), "last error: %s", e ? e : "(none)");
    GPU->free(d);
}
