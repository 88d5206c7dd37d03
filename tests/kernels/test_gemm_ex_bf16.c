/* test_gemm_ex_bf16.c — gemm_ex with bf16 storage (kernels/gemm_ex_args.h, issue #27) on the CPU,
 * on every path this CPU runs: the native AVX512_BF16 kernels (bf16 panels packed from the stored
 * bits) and an fp32 kernel set (bf16 operands widened into fp32 panels).
 *
 * The rules are exact, so every comparison is bit for bit, not within a tolerance:
 *  (a) A and/or B stored as bf16 with GEMM_COMPUTE_BF16 give the very D that their fp32-stored
 *      copies (the widened values) give with GEMM_COMPUTE_BF16: the product reads the same values.
 *  (b) a bf16 D is er_f32_to_bf16 of the fp32 D of the same call (bias and beta C included, and
 *      C = D accumulation), one rounding, padding columns untouched.
 *  (c) a bf16 C is read as its widened fp32 copy: the fp32 D of a bf16 C equals that of its copy.
 *  (d) what the rules forbid aborts with a message (bf16 A or B with fp32 compute, a bf16 D without
 *      work, bf16 operands with the bias-gradient epilogue, C = D of different types, unknown types).
 * Shapes: 1, odd, and past every blocking (k > kc = 768 for the bf16 kernels, 384 for fp32; m past
 * mc), all four transposes, padded leading dimensions, with and without bias and C. */
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/dtype.h"
#include "kernels/gemm.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

/* Random values in [-1, 1) that bf16 holds exactly (so both storages hold the same numbers), with
 * their bf16 bits. */
static void fill_bf16(float *x, uint16_t *h, long n, uint32_t seed) {
    rng_t r = rng_make(seed, rng_stream(47, seed, 0));
    for (long i = 0; i < n; i++) {
        h[i] = er_f32_to_bf16(2.0f * rng_uniform(&r) - 1.0f);
        x[i] = er_bf16_to_f32(h[i]);
    }
}

typedef struct {
    int m, n, k;
} shape;

static const shape shapes[] = {{1, 1, 1}, {1, 17, 5}, {7, 1, 3}, {13, 29, 31}, {33, 65, 2},
                               {50, 97, 800}, {197, 130, 67}, {301, 49, 390}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* One call's operands, each in both storages; D buffers start from the same garbage. */
typedef struct {
    int m, n, k, ta, tb, lda, ldb, ldc, ldd;
    long na, nb, nc, nd;
    float *A, *B, *C, *bias, *work;
    uint16_t *Ah, *Bh, *Ch;
} operands;

static void make(operands *o, shape s, int ta, int tb, int pad, uint32_t seed) {
    *o = (operands){.m = s.m, .n = s.n, .k = s.k, .ta = ta, .tb = tb};
    o->lda = (ta ? s.m : s.k) + pad, o->ldb = (tb ? s.k : s.n) + pad, o->ldc = s.n + 2 * pad, o->ldd = s.n + pad;
    o->na = (long)(ta ? s.k : s.m) * o->lda, o->nb = (long)(tb ? s.n : s.k) * o->ldb;
    o->nc = (long)s.m * o->ldc, o->nd = (long)s.m * o->ldd;
    o->A = xmalloc(4 * o->na), o->B = xmalloc(4 * o->nb), o->C = xmalloc(4 * o->nc), o->bias = xmalloc(4 * s.n);
    o->Ah = xmalloc(2 * o->na), o->Bh = xmalloc(2 * o->nb), o->Ch = xmalloc(2 * o->nc);
    o->work = xmalloc(4 * (long)s.m * s.n);
    fill_bf16(o->A, o->Ah, o->na, seed);
    fill_bf16(o->B, o->Bh, o->nb, seed + 1);
    fill_bf16(o->C, o->Ch, o->nc, seed + 2);
    uint16_t *tmp = xmalloc(2 * s.n);
    fill_bf16(o->bias, tmp, s.n, seed + 3);
    free(tmp);
}

static void drop(operands *o) {
    free(o->A), free(o->B), free(o->C), free(o->bias), free(o->work), free(o->Ah), free(o->Bh), free(o->Ch);
}

/* The call, storage per operand: at/bt/ct/dt GEMM_F32 or GEMM_BF16; cmode 0 no C, 1 C, 2 C = D. */
static void call(const operands *o, int at, int bt, int ct, int dt, int bias, int cmode, float alpha, float beta,
                 void *D) {
    gemm_ex_args a = {.transA = o->ta, .transB = o->tb, .m = o->m, .n = o->n, .k = o->k, .alpha = alpha, .beta = beta,
                      .A = at ? (const void *)o->Ah : o->A, .lda = o->lda, .B = bt ? (const void *)o->Bh : o->B,
                      .ldb = o->ldb, .ldc = cmode == 2 ? o->ldd : o->ldc, .D = D, .ldd = o->ldd,
                      .bias = bias ? o->bias : NULL, .a_type = at, .b_type = bt, .c_type = ct, .d_type = dt,
                      .compute = GEMM_COMPUTE_BF16, .work = dt ? o->work : NULL};
    a.C = cmode == 2 ? D : cmode == 1 ? (ct ? (const void *)o->Ch : o->C) : NULL;
    backend_cpu.gemm_ex(&a);
}

/* D's starting contents (C when C = D): the fp32 garbage, or its bf16 bits (the same values). */
static void start_d(const operands *o, int cmode, float *Df, uint16_t *Dh) {
    for (long i = 0; i < o->nd; i++) {
        uint16_t h = er_f32_to_bf16(cmode == 2 ? o->C[i % o->nc] * 0.75f : -3.0f - (float)(i % 7));
        if (Df) Df[i] = er_bf16_to_f32(h);
        if (Dh) Dh[i] = h;
    }
}

/* (a), (b), (c) for one shape, transposes and epilogue, on the kernels in use. */
static void check_case(const operands *o, int bias, int cmode, float alpha, float beta, const char *path) {
    char what[200];
    snprintf(what, sizeof what, "%s %dx%dx%d t%d%d bias %d C %d", path, o->m, o->n, o->k, o->ta, o->tb, bias, cmode);
    float *ref = xmalloc(4 * o->nd), *got = xmalloc(4 * o->nd);
    uint16_t *h = xmalloc(2 * o->nd);
    start_d(o, cmode, ref, NULL);
    call(o, GEMM_F32, GEMM_F32, GEMM_F32, GEMM_F32, bias, cmode, alpha, beta, ref);
    /* (a) bf16 A, B or both: the same bits as the fp32-stored copies */
    for (int ab = 1; ab <= 3; ab++) {
        start_d(o, cmode, got, NULL);
        call(o, ab & 1, ab >> 1, GEMM_F32, GEMM_F32, bias, cmode, alpha, beta, got);
        cr_assert(!memcmp(ref, got, 4 * o->nd), "%s: bf16 A %d B %d: D differs from the fp32-stored copies'", what,
                  ab & 1, ab >> 1);
    }
    /* (c) a bf16 C (a separate one; C = D needs D's type): read as its widened copy */
    if (cmode == 1) {
        start_d(o, cmode, got, NULL);
        call(o, GEMM_BF16, GEMM_BF16, GEMM_BF16, GEMM_F32, bias, cmode, alpha, beta, got);
        cr_assert(!memcmp(ref, got, 4 * o->nd), "%s: bf16 C: D differs from the fp32 C's", what);
    }
    /* (b) a bf16 D (with bf16 or fp32 operands and C): one rounding of the fp32 D */
    for (int t = 0; t < 2; t++) {
        start_d(o, cmode, NULL, h);
        int ct = cmode == 2 ? GEMM_BF16 : t;
        call(o, t, t, ct, GEMM_BF16, bias, cmode, alpha, beta, h);
        for (long i = 0; i < o->nd; i++) {
            int col = (int)(i % o->ldd);
            uint16_t want = col < o->n ? er_f32_to_bf16(ref[i]) : er_f32_to_bf16(-3.0f - (float)(i % 7));
            if (cmode == 2 && col >= o->n) want = er_f32_to_bf16(o->C[i % o->nc] * 0.75f);
            cr_assert_eq(h[i], want, "%s: bf16 D (operands %s) at %ld: %04x, want %04x (fp32 D %.9g)", what,
                         t ? "bf16" : "fp32", i, h[i], want, ref[i]);
        }
    }
    free(ref), free(got), free(h);
}

static void run_all(const char *path) {
    cr_assert_eq(sgemm_use_kernel(path), 0, "kernel set %s", path);
    uint32_t seed = 100;
    for (int s = 0; s < NSHAPES; s++)
        for (int t = 0; t < 4; t++) {
            operands o;
            make(&o, shapes[s], t & 1, t >> 1, s % 3, seed += 10);
            check_case(&o, 1, 1, 1.0f, 1.0f, path);  /* linear + residual */
            check_case(&o, 0, 0, 1.0f, 0.0f, path);  /* plain product */
            if (s % 2 == 0) check_case(&o, 1, 0, 0.5f, 0.0f, path);   /* bias only, alpha */
            if (s % 2 == 1) check_case(&o, 0, 1, 1.0f, -2.0f, path);  /* beta C */
            check_case(&o, s % 2, 2, 1.0f, 1.0f, path);               /* C = D: accumulate */
            drop(&o);
        }
    sgemm_use_kernel("auto");
}

Test(kernels_gemm_ex_bf16, native_bf16_kernels) {
    if (!cpu_has_avx512_bf16()) cr_skip_test("this CPU has no AVX512_BF16: the widening path is tested below");
    run_all("auto");
    run_all("avx512bf16-6x64");
}

Test(kernels_gemm_ex_bf16, widened_into_fp32_kernels) {
    run_all(cpu_has_avx512() ? "avx512" : cpu_has_avx2_fma() ? "avx2" : "scalar");
    run_all("scalar");
}

/* The packed bf16 panel of a bf16-stored operand holds the bits of packing its fp32 copy. */
Test(kernels_gemm_ex_bf16, stored_panels_equal_converted_panels) {
    if (!cpu_has_avx512_bf16()) cr_skip_test("this CPU has no AVX512_BF16");
    const int rows = 37, cols = 75, ld = 80;
    float *X = xmalloc(4 * rows * ld);
    uint16_t *H = xmalloc(2 * rows * ld), *P = xmalloc(2 * 64 * 80), *Q = xmalloc(2 * 64 * 80);
    fill_bf16(X, H, (long)rows * ld, 5);
    const int widths[] = {8, 14, 32, 48, 64};
    for (int wi = 0; wi < 5; wi++)
        for (int t = 0; t < 2; t++)
            for (int kc = 1; kc <= 35; kc += 17) {
                int w = widths[wi], len = t ? 37 - 3 : 30; /* lines: rows (line-major) or columns (depth-major) */
                memset(P, 0xAB, 2 * 64 * 80), memset(Q, 0xCD, 2 * 64 * 80);
                size_t bytes = 2L * ((len + w - 1) / w) * w * 2 * ((kc + 1) / 2);
                gemm_pack_b_bf16(t, X, ld, 1, kc, 2, len, w, P);
                gemm_pack_b_bf16_stored(t, H, ld, 1, kc, 2, len, w, Q);
                cr_assert(!memcmp(P, Q, bytes), "panel w %d trans %d kc %d", w, t, kc);
                gemm_pack_a_bf16(t, X, ld, 2, len, 1, kc, w, P);
                gemm_pack_a_bf16_stored(t, H, ld, 2, len, 1, kc, w, Q);
                cr_assert(!memcmp(P, Q, bytes), "A panel w %d trans %d kc %d", w, t, kc);
            }
    (void)cols;
    free(X), free(H), free(P), free(Q);
}

/* (d) rejections: each aborts after one message naming the rule. */
static float g_buf[64];
static uint16_t g_h[64];
static gemm_ex_args small(void) {
    return (gemm_ex_args){.m = 2, .n = 2, .k = 2, .alpha = 1.0f, .A = g_buf, .lda = 2, .B = g_buf + 8, .ldb = 2,
                          .D = g_buf + 16, .ldd = 2, .compute = GEMM_COMPUTE_BF16, .work = g_buf + 32};
}
Test(kernels_gemm_ex_bf16, bf16_a_with_fp32_compute_is_refused, .signal = SIGABRT) {
    gemm_ex_args a = small();
    a.A = g_h, a.a_type = GEMM_BF16, a.compute = GEMM_COMPUTE_FP32;
    backend_cpu.gemm_ex(&a);
}
Test(kernels_gemm_ex_bf16, bf16_b_with_fp32_compute_is_refused, .signal = SIGABRT) {
    gemm_ex_args a = small();
    a.B = g_h, a.b_type = GEMM_BF16, a.compute = GEMM_COMPUTE_FP32;
    backend_cpu.gemm_ex(&a);
}
Test(kernels_gemm_ex_bf16, bf16_d_without_work_is_refused, .signal = SIGABRT) {
    gemm_ex_args a = small();
    a.D = g_h, a.d_type = GEMM_BF16, a.work = NULL;
    backend_cpu.gemm_ex(&a);
}
Test(kernels_gemm_ex_bf16, bias_gradient_with_bf16_is_refused, .signal = SIGABRT) {
    gemm_ex_args a = small();
    a.transA = 1, a.A = g_h, a.a_type = GEMM_BF16, a.bias_grad = g_buf + 48;
    backend_cpu.gemm_ex(&a);
}
Test(kernels_gemm_ex_bf16, c_is_d_of_another_type_is_refused, .signal = SIGABRT) {
    gemm_ex_args a = small();
    a.D = g_h, a.C = g_h, a.ldc = 2, a.d_type = GEMM_BF16, a.c_type = GEMM_F32, a.beta = 1.0f;
    backend_cpu.gemm_ex(&a);
}
Test(kernels_gemm_ex_bf16, unknown_type_is_refused, .signal = SIGABRT) {
    gemm_ex_args a = small();
    a.c_type = 2;
    backend_cpu.gemm_ex(&a);
}
/* the same small call with valid types runs (the rejections above are the types, not the call):
 * ones(2x2) [1 2; 3 4] = [4 6; 4 6] */
Test(kernels_gemm_ex_bf16, small_valid_call_runs) {
    gemm_ex_args a = small();
    for (int i = 0; i < 4; i++) g_h[i] = er_f32_to_bf16(1.0f), g_buf[8 + i] = (float)(i + 1);
    a.A = g_h, a.a_type = GEMM_BF16, a.D = g_h + 32, a.d_type = GEMM_BF16;
    backend_cpu.gemm_ex(&a);
    const float want[4] = {4, 6, 4, 6};
    for (int i = 0; i < 4; i++) cr_assert_eq(g_h[32 + i], er_f32_to_bf16(want[i]), "D[%d]", i);
}
