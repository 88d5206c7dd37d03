/* test_cuda_parity_gemm_ex_bf16.c — gemm_ex with bf16 storage (kernels/gemm_ex_args.h, issue #27) on the
 * CUDA table against cpu_gemm_ex, through cuBLASLt (16BF layouts, bias epilogue) and the split path
 * (16BF product into fp32, then the typed epilogue kernel that rounds a bf16 D once).
 *
 * Bit for bit, not within a tolerance: the operands are multiples of 1/8 in [-1, 1] (bf16 holds them
 * exactly) and the depths small enough that every product and partial sum is exact in fp32, so the
 * fp32 result is the same number in any summation order (cuBLAS's, the emulation's double loop, the
 * CPU's blocks) and a bf16 D must be the same rounding of it. Results need more than bf16's 8 bits
 * (sums of up to k = 300 terms of 1/64 steps), so a D stored without rounding, truncated, or rounded
 * twice (product, then epilogue) shows. Cases: every storage combination cuBLAS has (A and B of one
 * type; C none, fp32, bf16 or D itself), all transposes, padded leading dimensions, bias or not.
 * Skips without a GPU (run it under python3 tests/cuda/emulate.py). */
#include <stdlib.h>
#include <string.h>

#include "kernels/dtype.h"
#include "tests/cuda/parity_util.h"

/* n values k/8, k in [-8, 8], as fp32 and as their bf16 bits (the same numbers) */
static void eighths(int64_t n, uint32_t tag, float *f, uint16_t *h) {
    float *r = rnd(n, -1, 1, tag);
    for (int64_t i = 0; i < n; i++) {
        f[i] = (float)(int)(r[i] * 8.0f) / 8.0f;
        h[i] = er_f32_to_bf16(f[i]);
    }
    free(r);
}

/* ab, c, d: storage of A and B, C, D (0 fp32, 1 bf16); cmode 0 no C, 1 C, 2 C = D. */
static void bf16_case(int m, int n, int k, int ta, int tb, int pad, int bias, int cmode, int ab, int ct, int dt,
                      float beta, uint32_t tag) {
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldd = n + pad, ldc = cmode == 2 ? ldd : n + 2 * pad;
    int64_t na = (int64_t)(ta ? k : m) * lda, nb = (int64_t)(tb ? n : k) * ldb, nd = (int64_t)m * ldd, nc = (int64_t)m * ldc;
    if (cmode == 2) ct = dt;
    float *A = malloc(4 * na), *B = malloc(4 * nb), *C = malloc(4 * nc), *D = malloc(4 * nd), *b = malloc(4 * n);
    uint16_t *Ah = malloc(2 * na), *Bh = malloc(2 * nb), *Ch = malloc(2 * nc), *Dh = malloc(2 * nd), *bh = malloc(2 * n);
    eighths(na, tag, A, Ah), eighths(nb, tag + 1, B, Bh), eighths(nc, tag + 2, C, Ch), eighths(nd, tag + 3, D, Dh);
    eighths(n, tag + 4, b, bh);
    const size_t es_ab = ab ? 2 : 4, es_c = ct ? 2 : 4, es_d = dt ? 2 : 4;
    const void *hA = ab ? (void *)Ah : A, *hB = ab ? (void *)Bh : B, *hC = ct ? (void *)Ch : C;
    void *hD = dt ? (void *)Dh : D;
    void *dA = dev_from(hA, es_ab * na), *dB = dev_from(hB, es_ab * nb), *dC = dev_from(hC, es_c * nc);
    void *dD = dev_from(hD, es_d * nd);
    float *db = devf(b, n), *cwork = malloc(4 * (size_t)m * n), *gwork = work_of(GPU, (size_t)m * n);
    gemm_ex_args a = {.transA = ta, .transB = tb, .m = m, .n = n, .k = k, .alpha = 1.0f, .beta = beta, .A = hA,
                      .lda = lda, .B = hB, .ldb = ldb, .C = cmode == 1 ? hC : cmode == 2 ? hD : NULL, .ldc = ldc,
                      .D = hD, .ldd = ldd, .bias = bias ? b : NULL, .a_type = ab, .b_type = ab, .c_type = ct,
                      .d_type = dt, .compute = GEMM_COMPUTE_BF16, .work = cwork};
    CPU->gemm_ex(&a);
    gemm_ex_args g = a;
    g.A = dA, g.B = dB, g.D = dD, g.C = cmode == 1 ? dC : cmode == 2 ? dD : NULL, g.bias = bias ? db : NULL, g.work = gwork;
    GPU->gemm_ex(&g);
    char what[200];
    snprintf(what, sizeof what, "gemm_ex %dx%dx%d t%d%d pad %d bias %d C %d, storage A/B %s C %s D %s", m, n, k, ta, tb, pad,
             bias, cmode, ab ? "bf16" : "fp32", ct ? "bf16" : "fp32", dt ? "bf16" : "fp32");
    gpu_ok(what);
    unsigned char *got = malloc(es_d * nd);
    GPU->download(got, dD, es_d * nd);
    for (int64_t i = 0; i < nd; i++) { /* padding columns too: untouched on both sides */
        uint32_t want = dt ? Dh[i] : 0, have = 0;
        if (dt) memcpy(&have, got + 2 * i, 2);
        else memcpy(&want, D + i, 4), memcpy(&have, got + 4 * i, 4);
        cr_assert_eq(have, want, "%s: element %lld: cuda %08x, cpu %08x", what, (long long)i, have, want);
    }
    free(got);
    GPU->free(dA); GPU->free(dB); GPU->free(dC); GPU->free(dD); GPU->free(db); GPU->free(gwork);
    free(A); free(B); free(C); free(D); free(b); free(Ah); free(Bh); free(Ch); free(Dh); free(bh); free(cwork);
}

static void bf16_cases(void) {
    uint32_t tag = 900;
    for (int ab = 0; ab <= 1; ab++)
        for (int dt = 0; dt <= 1; dt++)
            for (int cm = 0; cm < 4; cm++) { /* C: none, fp32, bf16, D itself */
                int cmode = cm == 0 ? 0 : cm == 3 ? 2 : 1, ct = cm == 2;
                bf16_case(2 * 50, 3 * 64, 64, 0, 1, 0, 1, cmode, ab, ct, dt, 1.0f, tag += 10); /* qkv / proj */
                bf16_case(29, 31, 23, 1, 0, 1, cm & 1, cmode, ab, ct, dt, -2.0f, tag += 10);     /* A^T, beta */
                bf16_case(21, 19, 300, 1, 1, 2, 1, cmode, ab, ct, dt, 1.0f, tag += 10);          /* both ^T */
                bf16_case(1, 17, 5, 0, 0, 3, 1, cmode, ab, ct, dt, 1.0f, tag += 10);             /* one row */
            }
}

Test(cuda, gemm_ex_bf16_storage_cublaslt) {
    setenv("ENDORET_CUDA_GEMM_EX", "lt", 1);
    require_gpu();
    bf16_cases();
}
Test(cuda, gemm_ex_bf16_storage_split_path) {
    setenv("ENDORET_CUDA_GEMM_EX", "split", 1);
    require_gpu();
    bf16_cases();
}

/* What the rules forbid is a recorded error naming the rule, and D is left alone. */
static void refused(int a_type, int b_type, int compute, const char *rule) {
    require_gpu();
    if (SELFTEST) cr_skip_test("self-test: the CPU table aborts instead (tests/kernels/test_gemm_ex_bf16.c)");
    float *d = GPU->alloc(64 * sizeof(float)), zero[16] = {0}, back[16];
    GPU->upload(d + 32, zero, sizeof zero);
    gemm_ex_args a = {.m = 4, .n = 4, .k = 4, .alpha = 1.0f, .A = d, .lda = 4, .B = d + 16, .ldb = 4, .D = d + 32,
                      .ldd = 4, .a_type = a_type, .b_type = b_type, .compute = compute};
    GPU->gemm_ex(&a);
    GPU->synchronize();
    const char *e = GPU->last_error();
    cr_assert(e && strstr(e, rule), "last error: %s (want: %s)", e ? e : "(none)", rule);
    GPU->download(back, d + 32, sizeof back);
    cr_assert(!memcmp(back, zero, sizeof zero), "D written by a refused call");
    GPU->free(d);
}
Test(cuda, gemm_ex_bf16_with_fp32_compute_is_refused) {
    refused(GEMM_BF16, GEMM_BF16, GEMM_COMPUTE_FP32, "needs GEMM_COMPUTE_BF16");
}
Test(cuda, gemm_ex_mixed_a_b_types_are_refused) {
    refused(GEMM_BF16, GEMM_F32, GEMM_COMPUTE_BF16, "different types");
}
