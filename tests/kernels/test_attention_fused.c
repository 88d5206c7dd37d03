/* test_attention_fused.c — the fused AVX-512 attention kernels (kernels/cpu/attention_avx512.c)
 * against the unfused reference path of kernels/cpu/attention.c and against double precision:
 * odd Tq / Tk (row and column tails of every tile), D = 16, 32, 48, 64, padded row strides (q/k/v
 * as views of one packed projection), gradients wanted or not, and bit-identical results on 1
 * and 2 threads. cpu_attention takes the fused kernels when there is no mask; an additive mask of
 * zeros adds nothing to the scores and sends the same call through the unfused path. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/gemm.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static float *rnd_buf(int64_t n, uint32_t seed, float sc) {
    float *p = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    rng_t r = rng_make(seed, 0);
    for (int64_t i = 0; i < n; i++) p[i] = sc * rng_normal(&r);
    return p;
}

typedef struct {
    int B, H, Tq, Tk, D;
    int64_t C, ldq; /* q [B, Tq, 3, H, D]-style packing: row stride 3 H D (+ pad) */
    float *qkv, *kv, *go, *o, *lse, *g, *gkv, *zero, *work;
    int64_t qs[3], kvs[3], os[3], ms[4];
} att_case;

/* The products' precision of this test's calls (GEMM_COMPUTE_*): fp32 unless NEED_BF16 set it. */
static int g_compute = GEMM_COMPUTE_FP32;

static void case_make(att_case *c, int B, int H, int Tq, int Tk, int D, uint32_t seed) {
    *c = (att_case){.B = B, .H = H, .Tq = Tq, .Tk = Tk, .D = D};
    c->C = (int64_t)H * D;
    c->ldq = 3 * c->C + 5;
    int64_t ldkv = 2 * c->C + 3;
    c->qkv = rnd_buf((int64_t)B * Tq * c->ldq, seed, 1.5f);     /* q: columns [0, C) */
    c->kv = rnd_buf((int64_t)B * Tk * ldkv, seed + 1, 1.5f);    /* k: [0, C), v: [C, 2C) */
    c->go = rnd_buf((int64_t)B * Tq * c->C, seed + 2, 1.0f);
    c->o = xcalloc((size_t)B * Tq * c->C, sizeof(float));
    c->lse = xcalloc((size_t)B * H * Tq, sizeof(float));
    c->g = xcalloc((size_t)B * Tq * c->ldq, sizeof(float));
    c->gkv = xcalloc((size_t)B * Tk * ldkv, sizeof(float));
    c->zero = xcalloc((size_t)Tq * Tk, sizeof(float));
    int64_t qs[3] = {Tq * c->ldq, D, c->ldq}, kvs[3] = {Tk * ldkv, D, ldkv}, os[3] = {Tq * c->C, D, c->C};
    int64_t ms[4] = {0, 0, Tk, 1};
    memcpy(c->qs, qs, sizeof qs), memcpy(c->kvs, kvs, sizeof kvs), memcpy(c->os, os, sizeof os);
    memcpy(c->ms, ms, sizeof ms);
    c->work = xmalloc(sizeof(float) * cpu_attention_workspace(g_compute, B, H, Tq, Tk, D));
}

static void case_free(att_case *c) {
    free(c->qkv), free(c->kv), free(c->go), free(c->o), free(c->lse), free(c->g), free(c->gkv);
    free(c->zero), free(c->work);
}

/* Forward then backward (gradients into zeroed buffers; which ones: bit 0 q, 1 k, 2 v);
 * fused = no mask, else the zero additive mask (the unfused path). */
static void case_run(att_case *c, int fused, int want) {
    int kind = fused ? MASK_NONE : MASK_ADD;
    float sc = 1.0f / sqrtf((float)c->D);
    memset(c->g, 0, sizeof(float) * c->B * c->Tq * c->ldq);
    memset(c->gkv, 0, sizeof(float) * c->B * c->Tk * c->kvs[2]);
    cpu_attention(g_compute, c->B, c->H, c->Tq, c->Tk, c->D, sc, c->qkv, c->qs, c->kv, c->kvs, c->kv + c->C, c->kvs, kind,
                  c->zero, c->ms, c->o, c->os, c->lse, c->work);
    cpu_attention_backward(g_compute, c->B, c->H, c->Tq, c->Tk, c->D, sc, c->qkv, c->qs, c->kv, c->kvs, c->kv + c->C, c->kvs,
                           kind, c->zero, c->ms, c->o, c->os, c->go, c->os, c->lse, want & 1 ? c->g : NULL, c->qs,
                           want & 2 ? c->gkv : NULL, c->kvs, want & 4 ? c->gkv + c->C : NULL, c->kvs, c->work);
}

static float *dup(const float *p, size_t n) {
    float *d = xmalloc(sizeof(float) * (n ? n : 1));
    memcpy(d, p, sizeof(float) * n);
    return d;
}

/* max |a - b| / (1 + |b|) over n */
static double relmax(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (!(e <= m)) m = e; /* NaN wins */
    }
    return m;
}

/* o of head (b, h) row i in double, and lse */
static double ref_row(const att_case *c, int b, int h, int i, double *out) {
    const float *q = c->qkv + b * c->qs[0] + h * c->qs[1] + i * c->qs[2];
    double *s = xmalloc(sizeof(double) * c->Tk), m = -INFINITY, z = 0;
    for (int j = 0; j < c->Tk; j++) {
        const float *k = c->kv + b * c->kvs[0] + h * c->kvs[1] + j * c->kvs[2];
        double d = 0;
        for (int e = 0; e < c->D; e++) d += (double)q[e] * k[e];
        s[j] = d / sqrt((double)c->D);
        m = fmax(m, s[j]);
    }
    for (int j = 0; j < c->Tk; j++) z += s[j] = exp(s[j] - m);
    for (int e = 0; e < c->D; e++) {
        double a = 0;
        for (int j = 0; j < c->Tk; j++) a += s[j] / z * c->kv[b * c->kvs[0] + h * c->kvs[1] + j * c->kvs[2] + c->C + e];
        out[e] = a;
    }
    free(s);
    return m + log(z);
}

#define WHAT "B%d H%d Tq%d Tk%d D%d want %d", B, H, Tq, Tk, D, want

/* tolerances: fp32 (tol 1) or bf16 products (tol = the factor printed by ATTN_TOL=1 runs, with room) */
static double tol_o = 2e-6, tol_g = 2e-5, tol_ref = 2e-5;

static void check_case(int B, int H, int Tq, int Tk, int D, int want, uint32_t seed) {
    att_case c;
    case_make(&c, B, H, Tq, Tk, D, seed);
    size_t no = (size_t)B * Tq * c.C, nl = (size_t)B * H * Tq, ng = (size_t)B * Tq * c.ldq,
           nkv = (size_t)B * Tk * c.kvs[2];
    case_run(&c, 0, want); /* reference: unfused */
    float *o0 = dup(c.o, no), *l0 = dup(c.lse, nl), *g0 = dup(c.g, ng), *kv0 = dup(c.gkv, nkv);
    case_run(&c, 1, want);
    if (getenv("ATTN_TOL"))
        cr_log_warn("B%d H%d Tq%d Tk%d D%d: o %.2e lse %.2e gq %.2e gkv %.2e", B, H, Tq, Tk, D, relmax(c.o, o0, no),
                    relmax(c.lse, l0, nl), relmax(c.g, g0, ng), relmax(c.gkv, kv0, nkv));
    cr_assert_lt(relmax(c.o, o0, no), tol_o, WHAT);
    cr_assert_lt(relmax(c.lse, l0, nl), tol_o, WHAT);
    cr_assert_lt(relmax(c.g, g0, ng), tol_g, WHAT);
    cr_assert_lt(relmax(c.gkv, kv0, nkv), tol_g, WHAT);
    for (size_t i = 0; i < ng; i++) /* gradients land only where asked, padding untouched */
        if ((i % c.ldq) >= (size_t)c.C || !(want & 1)) cr_assert_eq(c.g[i], 0.0f, WHAT);
    double *ref = xmalloc(sizeof(double) * D); /* and against double, a few rows */
    for (int t = 0; t < 5; t++) {
        int b = t % B, h = (t * 7) % H, i = (t * 31) % Tq;
        double l = ref_row(&c, b, h, i, ref);
        cr_assert_lt(fabs(c.lse[((int64_t)b * H + h) * Tq + i] - l), tol_ref * (1 + fabs(l)), WHAT);
        for (int e = 0; e < D; e++)
            cr_assert_lt(fabs(c.o[b * c.os[0] + h * c.os[1] + i * c.os[2] + e] - ref[e]), tol_ref, WHAT);
    }
    free(ref), free(o0), free(l0), free(g0), free(kv0);
    case_free(&c);
}

#define NEED_FUSED()                                                                             \
    do {                                                                                         \
        if (!cpu_simd()) cr_skip_test("fused attention kernels not in use (no AVX-512)");       \
    } while (0)

/* bf16 mode: the unfused path's sgemm rounds each product's inputs to bf16 as the fused kernels do,
 * but at other places (P normalised before rounding there, after the product here), so the two
 * agree to bf16 precision, not to fp32's. */
#define NEED_BF16()                                                                              \
    do {                                                                                         \
        if (!cpu_simd() || !cpu_has_avx512_bf16()) cr_skip_test("CPU without AVX512_BF16");      \
        g_compute = GEMM_COMPUTE_BF16;                                                           \
        tol_o = 2e-2, tol_g = 5e-2, tol_ref = 3e-2;                                              \
    } while (0)

static void all_shapes(void) {
    const int shapes[][5] = {{1, 1, 1, 1, 16},  {2, 3, 9, 53, 64},  {1, 2, 50, 17, 48}, {2, 1, 25, 7, 32},
                             {1, 1, 8, 48, 64}, {1, 2, 24, 49, 16}, {1, 1, 13, 97, 64}, {1, 1, 49, 5, 64},
                             {2, 2, 31, 33, 32}, {1, 1, 3, 2, 48}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        check_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], shapes[s][4], 7, 100 + (uint32_t)s);
    for (int want = 0; want < 7; want++) check_case(1, 2, 11, 21, 32, want, 200 + want);
}

Test(kernels_attention_fused, matches_unfused_path_and_double) {
    NEED_FUSED();
    all_shapes();
}

Test(kernels_attention_fused, vit_head_197_tokens) {
    NEED_FUSED();
    check_case(2, 3, 197, 197, 64, 7, 300);
}

Test(kernels_attention_fused, bf16_matches_unfused_path_and_double) {
    NEED_BF16();
    all_shapes();
    check_case(2, 3, 197, 197, 64, 7, 300);
}

/* 1 and 2 threads (heads split between threads): same bits. */
static void threads_case(void) {
    att_case c;
    case_make(&c, 3, 3, 41, 37, 64, 400);
    size_t no = (size_t)c.B * c.Tq * c.C, nl = (size_t)c.B * c.H * c.Tq, ng = (size_t)c.B * c.Tq * c.ldq,
           nkv = (size_t)c.B * c.Tk * c.kvs[2];
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    case_run(&c, 1, 7);
    float *o1 = dup(c.o, no), *l1 = dup(c.lse, nl), *g1 = dup(c.g, ng), *kv1 = dup(c.gkv, nkv);
    free(c.work);
    omp_set_num_threads(2);
    c.work = xmalloc(sizeof(float) * cpu_attention_workspace(g_compute, c.B, c.H, c.Tq, c.Tk, c.D));
    case_run(&c, 1, 7);
    omp_set_num_threads(nt);
    cr_expect_eq(memcmp(o1, c.o, sizeof(float) * no), 0);
    cr_expect_eq(memcmp(l1, c.lse, sizeof(float) * nl), 0);
    cr_expect_eq(memcmp(g1, c.g, sizeof(float) * ng), 0);
    cr_expect_eq(memcmp(kv1, c.gkv, sizeof(float) * nkv), 0);
    free(o1), free(l1), free(g1), free(kv1);
    case_free(&c);
}

Test(kernels_attention_fused, thread_count_independent) {
    NEED_FUSED();
    threads_case();
}

Test(kernels_attention_fused, bf16_thread_count_independent) {
    NEED_BF16();
    threads_case();
}
