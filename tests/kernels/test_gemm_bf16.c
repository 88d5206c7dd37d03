/* test_gemm_bf16.c — SGEMM_BF16 (bf16 inputs, fp32 accumulation) on every path this CPU runs:
 * the native AVX512_BF16 kernels (vdpbf16ps on bf16 panels) and the rounding path (fp32 kernels
 * on panels rounded to bf16) that other CPUs and forced instruction sets use.
 *
 * Tolerances:
 *  - against sgemm_ref on inputs pre-rounded to bf16: every product of two bf16 numbers is exact
 *    in fp32, so the only difference left is the fp32 accumulation (order and per-addition
 *    rounding) against ref's double sum: the same bound as the fp32 tests,
 *    4e-6 |alpha| sum_p |a_ip b_pj| (k+2)/sqrt(k+1) + 1e-6 |ref| (~67 ulp x sqrt(k) of the
 *    magnitude sum; a wrong pair, a lost odd step or unrounded inputs miss it by orders).
 *  - against the fp32 product of the unrounded inputs: rounding a and b to bf16 changes each by a
 *    relative u = 2^-8 at most (8 significant bits), so each product by at most 2u + u^2 =
 *    2^-7 + 2^-16 relative: the bound is (2^-7 + 2^-16) |alpha| sum_p |a_ip b_pj| plus the
 *    accumulation bound above. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "kernels/gemm.h"
#include "kernels/cpu/gemm_internal.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

/* Native kernels by name, the native set by shape, then the rounding path of each fp32 set. */
static const char *paths[] = {"avx512bf16-8x48", "avx512bf16-6x64", "avx512bf16-14x32",
                              "avx512bf16-12x32", "avx512bf16", "avx512", "avx2", "scalar", "auto"};
#define NPATHS ((int)(sizeof paths / sizeof paths[0]))

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void fill(float *x, long n, uint32_t seed) {
    rng_t r = rng_make(seed, rng_stream(43, seed, 0));
    for (long i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(&r) - 1.0f;
}

static float *rounded_copy(const float *x, long n) {
    float *y = xmalloc(sizeof(float) * (n ? n : 1));
    memcpy(y, x, sizeof(float) * n);
    gemm_round_bf16(y, n);
    return y;
}

/* sgemm in SGEMM_BF16 on unrounded inputs vs sgemm_ref on the same inputs rounded to bf16
 * (tight bound) and vs sgemm_ref on the unrounded inputs (bf16 bound). */
static void check_bf16(int tA, int tB, int m, int n, int k, float alpha, float beta, int pad,
                       int nan_c, uint32_t seed) {
    int lda = (tA ? m : k) + pad, ldb = (tB ? k : n) + pad, ldc = n + pad;
    long na = (long)(tA ? k : m) * lda, nb = (long)(tB ? n : k) * ldb, nc = (long)m * ldc;
    float *A = xmalloc(sizeof(float) * na), *B = xmalloc(sizeof(float) * nb);
    float *C = xmalloc(sizeof(float) * nc), *R = xmalloc(sizeof(float) * nc),
          *F = xmalloc(sizeof(float) * nc), *T = xmalloc(sizeof(float) * nc);
    fill(A, na, seed), fill(B, nb, seed + 1), fill(C, nc, seed + 2);
    if (nan_c)
        for (long i = 0; i < nc; i++) C[i] = (i % 3) ? NAN : INFINITY;
    memcpy(R, C, sizeof(float) * nc);
    memcpy(F, C, sizeof(float) * nc);
    float *Ar = rounded_copy(A, na), *Br = rounded_copy(B, nb);
    float *absA = xmalloc(sizeof(float) * na), *absB = xmalloc(sizeof(float) * nb);
    for (long i = 0; i < na; i++) absA[i] = fabsf(A[i]);
    for (long i = 0; i < nb; i++) absB[i] = fabsf(B[i]);
    sgemm_ref(tA, tB, m, n, k, 1.0f, absA, lda, absB, ldb, 0.0f, T, ldc);

    sgemm(SGEMM_BF16, tA, tB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    sgemm_ref(tA, tB, m, n, k, alpha, Ar, lda, Br, ldb, beta, R, ldc);
    sgemm_ref(tA, tB, m, n, k, alpha, A, lda, B, ldb, beta, F, ldc);
    const char *kname = sgemm_kernel_for(SGEMM_BF16, tA, m, n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            long at = (long)i * ldc + j;
            if (j >= n) {
                cr_assert(f_bits(C[at]) == f_bits(R[at]), "%s: padding of C changed at %d,%d", kname, i, j);
                continue;
            }
            float acc_tol = 4e-6f * fabsf(alpha) * T[at] * (float)(k + 2) / sqrtf((float)(k + 1)) +
                            1e-6f * fabsf(R[at]) + 1e-30f;
            cr_assert(isfinite(C[at]), "%s tA=%d tB=%d %dx%dx%d: C[%d,%d] = %g", kname, tA, tB, m, n, k,
                      i, j, C[at]);
            cr_assert(fabsf(C[at] - R[at]) <= acc_tol,
                      "%s tA=%d tB=%d %dx%dx%d alpha=%g beta=%g: C[%d,%d] = %.8g, ref on bf16 inputs "
                      "%.8g (tol %g)", kname, tA, tB, m, n, k, alpha, beta, i, j, C[at], R[at], acc_tol);
            float bf_tol = (0x1p-7f + 0x1p-16f) * fabsf(alpha) * T[at] + acc_tol;
            cr_assert(fabsf(C[at] - F[at]) <= bf_tol,
                      "%s %dx%dx%d: C[%d,%d] = %.8g vs fp32 %.8g beyond the bf16 bound %g", kname, m,
                      n, k, i, j, C[at], F[at], bf_tol);
        }
    free(A), free(B), free(C), free(R), free(F), free(T), free(Ar), free(Br), free(absA), free(absB);
}

static const int shapes[][3] = {
    {1, 1, 1},   {1, 1, 2},    {3, 3, 3},     {17, 17, 17},  {1, 17, 33},  {33, 1, 17},
    {17, 33, 1}, {15, 31, 7},  {14, 32, 5},   {33, 65, 129}, {29, 97, 301}, {5, 200, 3},
    {197, 64, 64}, {9, 49, 770},  /* k > the bf16 depth block (768): two blocks, odd last one */
};

/* Run `body` for every path this CPU has (the products of this file are SGEMM_BF16); counts how many
 * ran natively. */
#define FOR_EACH_PATH(pi, native)\
    _Pragma("GCC diagnostic ignored \"-Wunused-but-set-variable\"")                                                         \
    for (int pi = 0, native = 0; pi < NPATHS; pi++)                                         \
        if (sgemm_use_kernel(paths[pi]) == 0 &&                                              \
            ((native = !strncmp(sgemm_kernel_for(SGEMM_BF16, 0, 8, 8), "avx512bf16", 10)), 1))

Test(kernels_gemm_bf16, shapes_all_transposes_all_paths) {
    int ran_native = 0;
    FOR_EACH_PATH(pi, native) {
        ran_native += native;
        for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
            for (int t = 0; t < 4; t++)
                check_bf16(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f, 0, 0,
                           200 + s);
    }
    if (cpu_has_avx512_bf16()) cr_assert_geq(ran_native, 5, "the native bf16 kernels did not run");
    else cr_log_info("no AVX512_BF16 on this CPU: only the rounding path was tested");
}

Test(kernels_gemm_bf16, padded_leading_dims_alpha_beta_nan_c) {
    const float ab[][2] = {{1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, -1.0f}, {0.75f, 0.0f}};
    FOR_EACH_PATH(pi, native) {
        for (int t = 0; t < 4; t++) {
            for (int a = 0; a < 4; a++) {
                check_bf16(t >> 1, t & 1, 37, 45, 23, ab[a][0], ab[a][1], 5, 0, 7 + a);
                check_bf16(t >> 1, t & 1, 3, 70, 41, ab[a][0], ab[a][1], 3, 0, 17 + a);
            }
            check_bf16(t >> 1, t & 1, 19, 35, 13, 1.0f, 0.0f, 2, 1, 5);   /* beta 0 over NaN/Inf */
            check_bf16(t >> 1, t & 1, 30, 64, 9, -1.5f, 0.0f, 0, 1, 6);
        }
    }
}

Test(kernels_gemm_bf16, larger_shapes_threads_1_and_2_identical) {
    SLOW_TEST();
    const int dims[][3] = {{197, 768, 384}, {130, 300, 1001}};
    FOR_EACH_PATH(pi, native) {
        if (pi != 4 && pi != 8) continue;  /* the native set by shape, and auto */
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 4; t++) check_bf16(t >> 1, t & 1, dims[s][0], dims[s][1], dims[s][2], 1.0f, 0.5f, 1, 0, 60 + s);
    }
}

/* 1 and 2 threads (and 16, the shared-panel team) give bit-identical bf16 results. */
Test(kernels_gemm_bf16, deterministic_across_threads) {
    const int m = 211, n = 333, k = 515;
    float *A = xmalloc(sizeof(float) * m * k), *B = xmalloc(sizeof(float) * k * n);
    float *C1 = xmalloc(sizeof(float) * m * n), *C2 = xmalloc(sizeof(float) * m * n);
    fill(A, (long)m * k, 9), fill(B, (long)k * n, 10);
    FOR_EACH_PATH(pi, native) {
        if (pi != 4 && pi != 5) continue;
        for (int t = 0; t < 4; t++) {
            int tA = t >> 1, tB = t & 1, lda = tA ? m : k, ldb = tB ? k : n;
            omp_set_num_threads(2);
            sgemm(SGEMM_BF16, tA, tB, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C1, n);
            omp_set_num_threads(1);
            sgemm(SGEMM_BF16, tA, tB, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C2, n);
            cr_assert(memcmp(C1, C2, sizeof(float) * m * n) == 0, "%s t=%d: 1 thread != 2 threads", paths[pi], t);
            omp_set_num_threads(16);
            sgemm(SGEMM_BF16, tA, tB, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C2, n);
            cr_assert(memcmp(C1, C2, sizeof(float) * m * n) == 0, "%s t=%d: 16 threads != 2", paths[pi], t);
        }
    }
    free(A), free(B), free(C1), free(C2);
}

Test(kernels_gemm_bf16, strided_batched_matches_loop) {
    const int batch = 5, m = 23, n = 19, k = 11;
    FOR_EACH_PATH(pi, native) {
        if (pi != 4 && pi != 5) continue;
        for (int t = 0; t < 4; t++) {
            int tA = t >> 1, tB = t & 1, lda = (tA ? m : k) + 1, ldb = (tB ? k : n) + 2, ldc = n + 3;
            long sA = (long)(tA ? k : m) * lda + 7, sB = (long)(tB ? n : k) * ldb + 5, sC = (long)m * ldc + 1;
            float *A = xmalloc(sizeof(float) * sA * batch), *B = xmalloc(sizeof(float) * sB * batch);
            float *C = xmalloc(sizeof(float) * sC * batch), *R = xmalloc(sizeof(float) * sC * batch);
            fill(A, sA * batch, 1), fill(B, sB * batch, 2), fill(C, sC * batch, 3);
            memcpy(R, C, sizeof(float) * sC * batch);
            omp_set_num_threads(2);
            sgemm_strided_batched(SGEMM_BF16, tA, tB, m, n, k, 0.5f, A, lda, sA, B, ldb, sB, 1.5f, C, ldc, sC, batch);
            for (int b = 0; b < batch; b++) {
                sgemm(SGEMM_BF16, tA, tB, m, n, k, 0.5f, A + b * sA, lda, B + b * sB, ldb, 1.5f, R + b * sC, ldc);
                /* each product also within the bounds of the reference on bf16 inputs */
            }
            cr_assert(memcmp(C, R, sizeof(float) * sC * batch) == 0, "%s: batched != loop (t=%d)", paths[pi], t);
            free(A), free(B), free(C), free(R);
        }
        check_bf16(0, 1, 23, 19, 11, 0.5f, 1.5f, 1, 0, 99);
    }
}

/* The rounding helper (software) and the hardware conversion on hand-computed cases. */
Test(kernels_gemm_bf16, rounding_ties_nan_inf_largest) {
    const uint32_t in[] = {
        0x3f808000u,  /* 1 + 2^-8: tie between 1 and 1 + 2^-7 -> even (1.0) */
        0x3f818000u,  /* 1 + 3*2^-8: tie between 1 + 2^-7 (odd) and 1 + 2^-6 -> 1 + 2^-6 */
        0x3f808001u,  /* just above the tie -> up */
        0x3f807fffu,  /* just below the tie -> down */
        0xbf808000u,  /* -(1 + 2^-8) -> -1 */
        0x7f800000u,  /* +Inf */
        0xff800000u,  /* -Inf */
        0x7f7fffffu,  /* largest finite float: above the last bf16 midpoint -> +Inf */
        0x7f7f0000u,  /* largest finite bf16: unchanged */
        0x7f7f7fffu,  /* just below the midpoint past it -> stays largest finite */
        0x80000000u,  /* -0 */
        0x00800000u,  /* smallest normal: exact */
    };
    const uint32_t want[] = {0x3f800000u, 0x3f820000u, 0x3f810000u, 0x3f800000u, 0xbf800000u,
                             0x7f800000u, 0xff800000u, 0x7f800000u, 0x7f7f0000u, 0x7f7f0000u,
                             0x80000000u, 0x00800000u};
    const int n = (int)(sizeof in / sizeof in[0]);
    float x[16];
    for (int i = 0; i < n; i++) x[i] = bits_f(in[i]);
    gemm_round_bf16(x, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(f_bits(x[i]), want[i], "round(0x%08x) = 0x%08x, want 0x%08x", in[i], f_bits(x[i]), want[i]);
    /* NaN stays NaN (a payload only in the low 16 bits must not turn into Inf), sign kept. */
    float nans[3] = {bits_f(0x7f800001u), bits_f(0xff800001u), bits_f(0x7fc00000u)};
    gemm_round_bf16(nans, 3);
    for (int i = 0; i < 3; i++) cr_assert(isnan(nans[i]), "NaN %d lost", i);
    cr_assert(f_bits(nans[1]) >> 31, "sign of -NaN lost");

    if (!cpu_has_avx512_bf16()) return;
    uint16_t h[16];
    for (int i = 0; i < n; i++) x[i] = bits_f(in[i]);
    gemm_cvt_bf16(x, h, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq((uint32_t)h[i] << 16, want[i], "vcvtne2ps2bf16(0x%08x) = 0x%04x", in[i], h[i]);
    gemm_cvt_bf16(nans, h, 3);
    for (int i = 0; i < 3; i++) cr_assert(isnan(bits_f((uint32_t)h[i] << 16)), "hw NaN %d lost", i);
    /* fp32 denormals: the software helper rounds them like any value; the hardware conversion
     * reads them as zero (Intel SDM: DAZ, sign kept) — the one difference in the inputs. */
    float den[3] = {0x1p-130f, -0x1p-130f, 0x1.fffp-127f};
    gemm_cvt_bf16(den, h, 3);
    cr_assert(h[0] == 0x0000 && h[1] == 0x8000 && h[2] == 0x0000, "hw denormals: %04x %04x %04x", h[0], h[1], h[2]);
    gemm_round_bf16(den, 3);
    cr_assert(f_bits(den[0]) == 0x00080000u && f_bits(den[2]) == 0x00800000u, "sw denormals");
}

/* Where the native path may differ from the rounding path, measured on this CPU (docs/gemm.md):
 * the order of the two products inside a depth pair, and denormal inputs. */
Test(kernels_gemm_bf16, native_pair_order_and_denormals) {
    if (!cpu_has_avx512_bf16()) cr_skip_test("no AVX512_BF16 on this CPU");
    cr_assert_eq(sgemm_use_kernel("avx512bf16-8x48"), 0);
    /* Pair 1 puts 1 in the accumulator; pair 2 adds -1 (depth 2) and 2^-30 (depth 3). Depth 2
     * first gives 2^-30 (the reference order); depth 3 first gives 1 + 2^-30 = 1, then 0. */
    float A[4] = {1.0f, 0.0f, -1.0f, 0x1p-30f}, B[4] = {1.0f, 1.0f, 1.0f, 1.0f}, C = NAN;
    sgemm(SGEMM_BF16, 0, 0, 1, 1, 4, 1.0f, A, 4, B, 1, 0.0f, &C, 1);
    cr_log_info("native pair order probe: %g (0: odd depth first as Intel documents; 2^-30: even first)", C);
    cr_assert(C == 0.0f || C == 0x1p-30f, "pair sum %g is neither order's result", C);
    float R = NAN;
    sgemm_use_kernel("avx512");
    sgemm(SGEMM_BF16, 0, 0, 1, 1, 4, 1.0f, A, 4, B, 1, 0.0f, &R, 1);
    cr_assert_eq(R, 0x1p-30f, "the rounding path adds depth in order");

    /* A denormal input (2^-130) times 2^100: treated as zero by vdpbf16ps (and its conversion),
     * kept by the rounding path. */
    float a1[2] = {0x1p-130f, 0.0f}, b1[2] = {0x1p100f, 0.0f}, c1 = NAN, r1 = NAN;
    sgemm_use_kernel("avx512bf16-8x48");
    sgemm(SGEMM_BF16, 0, 0, 1, 1, 2, 1.0f, a1, 2, b1, 1, 0.0f, &c1, 1);
    sgemm_use_kernel("avx512");
    sgemm(SGEMM_BF16, 0, 0, 1, 1, 2, 1.0f, a1, 2, b1, 1, 0.0f, &r1, 1);
    cr_log_info("denormal input: native %g, rounding path %g", c1, r1);
    cr_assert_eq(r1, 0x1p-30f);
    cr_assert(c1 == 0.0f || c1 == 0x1p-30f, "denormal: %g", c1);
}

Test(kernels_gemm_bf16, precision_and_kernel_selection) {
    cr_assert_eq(sgemm_use_kernel("auto"), 0);
    if (cpu_has_avx512_bf16()) {
        cr_assert_str_eq(sgemm_kernel_name(SGEMM_BF16), "avx512bf16-auto");
        cr_assert_str_eq(sgemm_kernel_for(SGEMM_BF16, 0, 197, 64), "avx512bf16-6x64");
        cr_assert_str_eq(sgemm_kernel_name(SGEMM_FP32), "avx512-auto");
        cr_assert_eq(sgemm_use_kernel("avx512"), 0);  /* forcing an fp32 set: rounding path */
        cr_assert_str_eq(sgemm_kernel_name(SGEMM_BF16), "avx512-auto");
        cr_assert_eq(sgemm_use_kernel("avx512bf16-14x32"), 0);
        cr_assert_str_eq(sgemm_kernel_name(SGEMM_BF16), "avx512bf16-14x32");
        /* a bf16 kernel name leaves fp32 products on the best fp32 set */
        cr_assert_str_eq(sgemm_kernel_name(SGEMM_FP32), "avx512-auto");
    } else {
        cr_assert_eq(sgemm_use_kernel("avx512bf16"), -1);
    }
}

/* A product's precision is its first argument and nothing else: the retired process-wide setting's
 * variable ($ENDORET_GEMM_PRECISION) changes nothing, and products of both precisions interleave.
 * 1 + 2^-10 is not a bf16 number (8 significant bits): fp32 keeps it, bf16 rounds it to 1. */
Test(kernels_gemm_bf16, precision_is_per_call) {
    setenv("ENDORET_GEMM_PRECISION", "bf16", 1);
    const float a = 1.0f + 0x1p-10f, b = 1.0f;
    float c32 = NAN, c16 = NAN, c32b = NAN;
    sgemm(SGEMM_FP32, 0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c32, 1);
    sgemm(SGEMM_BF16, 0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c16, 1);
    sgemm(SGEMM_FP32, 0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c32b, 1);
    cr_assert_eq(c32, a, "fp32 product %.9g, want %.9g (the environment must not change it)", c32, a);
    cr_assert_eq(c16, 1.0f, "bf16 product %.9g, want 1", c16);
    cr_assert_eq(c32b, a, "fp32 after a bf16 product: %.9g", c32b);
}
