/* test_cuda_parity_gemm_ex.c — the gemm_ex op (a product with bias and C epilogue) of the CUDA table
 * against cpu_gemm_ex, through cuBLASLt (ENDORET_CUDA_GEMM_EX=lt, the default) and through the split
 * path (product, then one epilogue kernel): fp32 at 1e-5 and bf16 compute at 2e-2 (the tolerances of
 * test_cuda_parity.c). The cases are the ViT's: x W^T + b (qkv, fc1), x W^T + b + residual (proj,
 * fc2), no bias, the other transposes, padded leading dimensions, and C = D (an accumulating
 * product). Skips without a GPU. */
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

static void gemm_ex_cases(void) {
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
