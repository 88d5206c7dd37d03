/* test_gemm.c — sgemm (every kernel this CPU runs) against the naive double-accumulating
 * reference: odd shapes, all transpose combinations, padded leading dimensions, alpha/beta
 * (beta = 0 over NaN garbage), batched vs a loop, and bit-identical repeats. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/gemm.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

/* Every compiled kernel by full name (those this CPU cannot run are skipped), then "auto". */
static const char *isas[] = {"avx512-8x48", "avx512-6x64", "avx512-14x32", "avx512-12x32",
                             "avx2-6x16",   "scalar-4x8",  "auto"};
#define NKERNELS ((int)(sizeof isas / sizeof isas[0]))

static void fill(float *x, long n, uint32_t seed) {
    rng_t r = rng_make(seed, rng_stream(42, seed, 0));
    for (long i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(&r) - 1.0f;
}

/* Stored sizes of A/B for the given op and leading dimensions. */
static long a_len(int tA, int m, int k, int lda) { return tA ? (long)(k > 0 ? k : 1) * lda : (long)(m > 0 ? m : 1) * lda; }
static long b_len(int tB, int k, int n, int ldb) { return tB ? (long)(n > 0 ? n : 1) * ldb : (long)(k > 0 ? k : 1) * ldb; }

/* Compare sgemm with sgemm_ref on one configuration; the tolerance scales with
 * |alpha| sum_p |a_ip||b_pj| + |beta c_ij| (float rounding of a k-term dot product). */
static void check_one(int tA, int tB, int m, int n, int k, float alpha, float beta, int pad,
                      int nan_c, uint32_t seed) {
    int lda = (tA ? m : k) + pad, ldb = (tB ? k : n) + pad, ldc = n + pad;
    if (lda < 1) lda = 1;
    if (ldb < 1) ldb = 1;
    long na = a_len(tA, m, k, lda), nb = b_len(tB, k, n, ldb), nc = (long)m * ldc;
    float *A = xmalloc(sizeof(float) * na), *B = xmalloc(sizeof(float) * nb);
    float *C = xmalloc(sizeof(float) * (nc + 1)), *R = xmalloc(sizeof(float) * (nc + 1));
    float *absA = xmalloc(sizeof(float) * na), *absB = xmalloc(sizeof(float) * nb),
          *T = xmalloc(sizeof(float) * (nc + 1));
    fill(A, na, seed), fill(B, nb, seed + 1), fill(C, nc, seed + 2);
    if (nan_c)
        for (long i = 0; i < nc; i++) C[i] = (i % 3) ? NAN : INFINITY;
    memcpy(R, C, sizeof(float) * nc);
    for (long i = 0; i < na; i++) absA[i] = fabsf(A[i]);
    for (long i = 0; i < nb; i++) absB[i] = fabsf(B[i]);
    sgemm_ref(tA, tB, m, n, k, 1.0f, absA, lda, absB, ldb, 0.0f, T, ldc);

    sgemm(SGEMM_FP32, tA, tB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    sgemm_ref(tA, tB, m, n, k, alpha, A, lda, B, ldb, beta, R, ldc);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < ldc; j++) {
            long at = (long)i * ldc + j;
            if (j >= n) {  /* padding columns of C must be untouched */
                cr_assert(memcmp(&C[at], &R[at], sizeof(float)) == 0 || (isnan(C[at]) && isnan(R[at])),
                          "padding of C changed at row %d col %d", i, j);
                continue;
            }
            float tol = 4e-6f * (fabsf(alpha) * T[at] * (float)(k + 2)) / sqrtf((float)(k + 1)) +
                        1e-6f * fabsf(R[at]) + 1e-30f;
            cr_assert(isfinite(C[at]), "%s tA=%d tB=%d %dx%dx%d: C[%d,%d] = %g not finite",
                      sgemm_kernel_name(SGEMM_FP32), tA, tB, m, n, k, i, j, C[at]);
            cr_assert(fabsf(C[at] - R[at]) <= tol,
                      "%s tA=%d tB=%d %dx%dx%d alpha=%g beta=%g: C[%d,%d] = %.8g, reference %.8g (tol %g)",
                      sgemm_kernel_name(SGEMM_FP32), tA, tB, m, n, k, alpha, beta, i, j, C[at], R[at], tol);
        }
    }
    free(A), free(B), free(C), free(R), free(absA), free(absB), free(T);
}

static const int odd_shapes[][3] = {
    {1, 1, 1},    {3, 3, 3},     {17, 17, 17},  {1, 17, 33},  {33, 1, 17},   {17, 33, 1},
    {33, 65, 129}, {15, 31, 7},  {14, 32, 5},   {29, 97, 300}, {197, 64, 197}, {5, 200, 3},
};

Test(kernels_gemm, odd_shapes_all_transposes_all_kernels) {
    for (int ki = 0; ki < NKERNELS; ki++) {
        if (sgemm_use_kernel(isas[ki])) continue;  /* this CPU cannot run it */
        for (int s = 0; s < (int)(sizeof odd_shapes / sizeof odd_shapes[0]); s++)
            for (int t = 0; t < 4; t++)
                check_one(t >> 1, t & 1, odd_shapes[s][0], odd_shapes[s][1], odd_shapes[s][2], 1.0f,
                          0.0f, 0, 0, 100 + s);
    }
}

Test(kernels_gemm, padded_leading_dims_alpha_beta) {
    const float ab[][2] = {{1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, -1.0f}, {0.75f, 0.0f}};
    for (int ki = 0; ki < NKERNELS; ki++) {
        if (sgemm_use_kernel(isas[ki])) continue;
        for (int t = 0; t < 4; t++)
            for (int a = 0; a < 4; a++) {
                check_one(t >> 1, t & 1, 37, 45, 23, ab[a][0], ab[a][1], 5, 0, 7 + a);
                check_one(t >> 1, t & 1, 3, 70, 41, ab[a][0], ab[a][1], 3, 0, 17 + a);
            }
    }
}

Test(kernels_gemm, beta_zero_ignores_nan_in_c) {
    for (int ki = 0; ki < NKERNELS; ki++) {
        if (sgemm_use_kernel(isas[ki])) continue;
        for (int t = 0; t < 4; t++) {
            check_one(t >> 1, t & 1, 19, 35, 13, 1.0f, 0.0f, 2, 1, 5);
            check_one(t >> 1, t & 1, 30, 64, 9, -1.5f, 0.0f, 0, 1, 6);
        }
    }
}

Test(kernels_gemm, k_zero_and_alpha_zero_scale_c) {
    float C[6] = {1, 2, 3, 4, 5, 6}, A[1] = {NAN}, B[1] = {NAN};
    sgemm(SGEMM_FP32, 0, 0, 2, 3, 0, 1.0f, A, 1, B, 3, 2.0f, C, 3);
    for (int i = 0; i < 6; i++) cr_assert_eq(C[i], 2.0f * (i + 1), "k=0: C = beta C");
    float D[4] = {NAN, NAN, INFINITY, NAN};
    sgemm(SGEMM_FP32, 0, 0, 2, 2, 0, 1.0f, A, 1, B, 2, 0.0f, D, 2);
    for (int i = 0; i < 4; i++) cr_assert_eq(D[i], 0.0f, "k=0, beta=0: zeros even over NaN");
    float E[4] = {1, 2, 3, 4}, A2[4] = {1, 1, 1, 1};
    sgemm(SGEMM_FP32, 0, 0, 2, 2, 2, 0.0f, A2, 2, A2, 2, 0.5f, E, 2);
    for (int i = 0; i < 4; i++) cr_assert_eq(E[i], 0.5f * (i + 1), "alpha=0: C = beta C");
    sgemm(SGEMM_FP32, 0, 0, 0, 5, 5, 1.0f, A, 5, B, 5, 0.0f, NULL, 5);  /* m = 0: nothing touched */
}

Test(kernels_gemm, larger_shapes_threaded) {
    SLOW_TEST();
    const int shapes[][3] = {{197, 768, 384}, {300, 130, 513}, {64, 1000, 257}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++)
            check_one(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.5f, 1, 0, 50 + s);
}

Test(kernels_gemm, strided_batched_matches_loop) {
    const int batch = 5, m = 23, n = 19, k = 11;
    for (int t = 0; t < 4; t++) {
        int tA = t >> 1, tB = t & 1, lda = (tA ? m : k) + 1, ldb = (tB ? k : n) + 2, ldc = n + 3;
        long sA = (long)(tA ? k : m) * lda + 7, sB = (long)(tB ? n : k) * ldb + 5, sC = (long)m * ldc + 1;
        float *A = xmalloc(sizeof(float) * sA * batch), *B = xmalloc(sizeof(float) * sB * batch);
        float *C = xmalloc(sizeof(float) * sC * batch), *R = xmalloc(sizeof(float) * sC * batch);
        fill(A, sA * batch, 1), fill(B, sB * batch, 2), fill(C, sC * batch, 3);
        memcpy(R, C, sizeof(float) * sC * batch);
        sgemm_strided_batched(SGEMM_FP32, tA, tB, m, n, k, 0.5f, A, lda, sA, B, ldb, sB, 1.5f, C, ldc, sC, batch);
        for (int b = 0; b < batch; b++)
            sgemm(SGEMM_FP32, tA, tB, m, n, k, 0.5f, A + b * sA, lda, B + b * sB, ldb, 1.5f, R + b * sC, ldc);
        /* Same kernel and blocking per product => bit-identical to the loop. */
        cr_assert(memcmp(C, R, sizeof(float) * sC * batch) == 0, "batched != loop (t=%d)", t);
        free(A), free(B), free(C), free(R);
    }
}

Test(kernels_gemm, deterministic_for_fixed_threads) {
    const int m = 211, n = 333, k = 515;
    float *A = xmalloc(sizeof(float) * m * k), *B = xmalloc(sizeof(float) * k * n);
    float *C1 = xmalloc(sizeof(float) * m * n), *C2 = xmalloc(sizeof(float) * m * n),
          *C3 = xmalloc(sizeof(float) * m * n);
    fill(A, (long)m * k, 9), fill(B, (long)k * n, 10);
    omp_set_num_threads(2);
    sgemm(SGEMM_FP32, 0, 1, m, n, k, 1.0f, A, k, B, k, 0.0f, C1, n);
    sgemm(SGEMM_FP32, 0, 1, m, n, k, 1.0f, A, k, B, k, 0.0f, C2, n);
    cr_assert(memcmp(C1, C2, sizeof(float) * m * n) == 0, "two runs with 2 threads differ");
    /* The work split never changes the per-element operation order, so 1 thread agrees too. */
    omp_set_num_threads(1);
    sgemm(SGEMM_FP32, 0, 1, m, n, k, 1.0f, A, k, B, k, 0.0f, C3, n);
    cr_assert(memcmp(C1, C3, sizeof(float) * m * n) == 0, "1 thread != 2 threads");
    /* More threads than cores (the 16-thread work split, run on whatever cores exist). */
    omp_set_num_threads(16);
    sgemm(SGEMM_FP32, 0, 1, m, n, k, 1.0f, A, k, B, k, 0.0f, C3, n);
    cr_assert(memcmp(C1, C3, sizeof(float) * m * n) == 0, "16 threads != 2 threads");
    free(A), free(B), free(C1), free(C2), free(C3);
}

Test(kernels_gemm, inside_parallel_region_single_threaded) {
    /* Each OpenMP thread runs its own product; results equal the serial call. */
    const int m = 40, n = 50, k = 30, nb = 4;
    float *A = xmalloc(sizeof(float) * m * k), *B = xmalloc(sizeof(float) * k * n);
    float *C = xmalloc(sizeof(float) * nb * m * n), *R = xmalloc(sizeof(float) * m * n);
    fill(A, (long)m * k, 3), fill(B, (long)k * n, 4);
    sgemm(SGEMM_FP32, 0, 0, m, n, k, 1.0f, A, k, B, n, 0.0f, R, n);
#pragma omp parallel for num_threads(2)
    for (int b = 0; b < nb; b++) sgemm(SGEMM_FP32, 0, 0, m, n, k, 1.0f, A, k, B, n, 0.0f, C + (long)b * m * n, n);
    for (int b = 0; b < nb; b++)
        cr_assert(memcmp(C + (long)b * m * n, R, sizeof(float) * m * n) == 0, "product %d differs", b);
    free(A), free(B), free(C), free(R);
}

Test(kernels_gemm, kernel_selection) {
    cr_assert_eq(sgemm_use_kernel("no-such-kernel"), -1);
    cr_assert_eq(sgemm_use_kernel("scalar"), 0);
    cr_assert_str_eq(sgemm_kernel_name(SGEMM_FP32), "scalar-4x8");
    cr_assert_str_eq(sgemm_kernel_for(SGEMM_FP32, 0, 10, 10), "scalar-4x8");
    if (sgemm_use_kernel("avx512") == 0) {
        cr_assert_str_eq(sgemm_kernel_name(SGEMM_FP32), "avx512-auto");
        cr_assert_str_eq(sgemm_kernel_for(SGEMM_FP32, 0, 197, 64), "avx512-6x64", "n = 64 fits 64-wide tiles exactly");
        cr_assert_str_eq(sgemm_kernel_for(SGEMM_FP32, 0, 200, 96), "avx512-8x48");
    }
    cr_assert_eq(sgemm_use_kernel(NULL), 0);
}
