/* test_gemm_prepack.c — sgemm_with_packed_b (a B packed once by sgemm_pack_b) against plain sgemm:
 * bit-identical on every kernel set this CPU runs, in fp32 and bf16, every transpose, odd sizes and
 * depths past one depth block (odd last bf16 pair), alpha/beta with a live C, padded leading
 * dimensions, 1, 2 and 16 threads; and the fallbacks: a precision, kernel or blocking change since
 * packing, or another B, make it use B itself (still equal to sgemm under the new settings). */
#include <omp.h>
#include <string.h>

#include "kernels/gemm.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static void fill(float *x, long n, uint32_t seed) {
    rng_t r = rng_make(seed, rng_stream(47, seed, 0));
    for (long i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(&r) - 1.0f;
}

/* op(A) m x k, op(B) k x n with `pad` extra columns in every leading dimension. */
typedef struct {
    int tA, tB, m, n, k, lda, ldb, ldc;
    float *A, *B, *C0, *C1, *C2;
} case_t;

static case_t make_case(int tA, int tB, int m, int n, int k, int pad, uint32_t seed) {
    case_t c = {tA, tB, m, n, k, (tA ? m : k) + pad, (tB ? k : n) + pad, n + pad, 0, 0, 0, 0, 0};
    long na = (long)(tA ? k : m) * c.lda, nb = (long)(tB ? n : k) * c.ldb, nc = (long)m * c.ldc;
    c.A = xmalloc(sizeof(float) * na), c.B = xmalloc(sizeof(float) * nb);
    c.C0 = xmalloc(sizeof(float) * nc), c.C1 = xmalloc(sizeof(float) * nc), c.C2 = xmalloc(sizeof(float) * nc);
    fill(c.A, na, seed), fill(c.B, nb, seed + 1), fill(c.C0, nc, seed + 2);
    memcpy(c.C1, c.C0, sizeof(float) * nc);
    memcpy(c.C2, c.C0, sizeof(float) * nc);
    return c;
}

/* The precision every product and pack of a test uses (set by the test). */
static int g_prec = SGEMM_FP32;

static void free_case(case_t *c) { free(c->A), free(c->B), free(c->C0), free(c->C1), free(c->C2); }

/* C1 = sgemm, C2 = sgemm_with_packed_b(p) from the same C; equal bits (padding of C included). */
static void expect_same(case_t *c, const sgemm_packed_b *p, float alpha, float beta, const char *what) {
    long nc = (long)c->m * c->ldc;
    memcpy(c->C1, c->C0, sizeof(float) * nc);
    memcpy(c->C2, c->C0, sizeof(float) * nc);
    sgemm(g_prec, c->tA, c->tB, c->m, c->n, c->k, alpha, c->A, c->lda, c->B, c->ldb, beta, c->C1, c->ldc);
    sgemm_with_packed_b(g_prec, c->tA, c->tB, c->m, c->n, c->k, alpha, c->A, c->lda, c->B, c->ldb, p, beta,
                        c->C2, c->ldc);
    cr_assert(memcmp(c->C1, c->C2, sizeof(float) * nc) == 0,
              "%s: %s tA=%d tB=%d %dx%dx%d: prepacked B != sgemm", what, sgemm_kernel_name(g_prec), c->tA,
              c->tB, c->m, c->n, c->k);
}

static const char *sets[] = {"auto", "avx512bf16", "avx512", "avx2", "scalar"};
static const int shapes[][3] = {{1, 1, 1},   {7, 33, 3},    {197, 48, 385}, {13, 50, 770},
                                {197, 1152, 64}, {2, 97, 1537}, {33, 65, 129}};

Test(kernels_gemm_prepack, bit_identical_to_sgemm_every_set_precision_transpose_thread_count) {
    int ran = 0;
    for (int si = 0; si < (int)(sizeof sets / sizeof sets[0]); si++)
        for (int prec = SGEMM_FP32; prec <= SGEMM_BF16; prec++) {
            if (sgemm_use_kernel(sets[si]) != 0) continue; /* not on this CPU */
            g_prec = prec;
            for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
                for (int t = 0; t < 4; t++) {
                    case_t c = make_case(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], s % 2 ? 3 : 0,
                                         (uint32_t)(100 * s + t));
                    sgemm_packed_b *p = sgemm_pack_b(g_prec, c.tB, c.k, c.n, c.B, c.ldb);
                    cr_assert_not_null(p);
                    cr_assert(sgemm_packed_b_usable(p, g_prec, c.tB, c.k, c.n, c.ldb), "%s: fresh pack unusable", sets[si]);
                    const int threads[] = {1, 2, 16};
                    for (int ti = 0; ti < 3; ti++) {
                        omp_set_num_threads(threads[ti]);
                        expect_same(&c, p, 1.0f, 0.0f, sets[si]);
                        expect_same(&c, p, -0.75f, 0.5f, sets[si]);
                    }
                    omp_set_num_threads(2);
                    sgemm_packed_b_free(p);
                    free_case(&c);
                    ran++;
                }
        }
    sgemm_use_kernel(NULL);
    g_prec = SGEMM_FP32;
    cr_assert(ran >= 2 * 7 * 4, "only %d cases ran", ran);
}

/* The packed form is used only while it describes B under the current settings: otherwise the
 * product reads B (checked by making the packed copy stale: B changed after packing). */
Test(kernels_gemm_prepack, stale_or_mismatched_pack_falls_back_to_b) {
    sgemm_use_kernel(NULL);
    g_prec = SGEMM_FP32;
    case_t c = make_case(0, 1, 37, 70, 90, 0, 7);
    sgemm_packed_b *p = sgemm_pack_b(g_prec, 1, c.k, c.n, c.B, c.ldb);
    /* used: a stale copy (B changed after packing) gives the old product, so it differs from sgemm */
    c.B[0] += 1.0f;
    long nc = (long)c.m * c.ldc;
    sgemm(g_prec, 0, 1, c.m, c.n, c.k, 1.0f, c.A, c.lda, c.B, c.ldb, 0.0f, c.C1, c.ldc);
    sgemm_with_packed_b(g_prec, 0, 1, c.m, c.n, c.k, 1.0f, c.A, c.lda, c.B, c.ldb, p, 0.0f, c.C2, c.ldc);
    cr_assert(memcmp(c.C1, c.C2, sizeof(float) * nc) != 0, "the packed copy was not used");
    /* not used: another precision, another kernel set, another blocking, another shape or B */
    cr_assert(!sgemm_packed_b_usable(p, g_prec, 1, c.k, c.n + 1, c.ldb));
    cr_assert(!sgemm_packed_b_usable(p, g_prec, 0, c.k, c.n, c.ldb));
    g_prec = SGEMM_BF16;
    cr_assert(!sgemm_packed_b_usable(p, g_prec, 1, c.k, c.n, c.ldb));
    expect_same(&c, p, 1.0f, 0.0f, "bf16 after an fp32 pack");
    g_prec = SGEMM_FP32;
    if (sgemm_use_kernel("scalar") == 0) {
        cr_assert(!sgemm_packed_b_usable(p, g_prec, 1, c.k, c.n, c.ldb));
        expect_same(&c, p, 1.0f, 0.0f, "scalar after an auto pack");
        sgemm_use_kernel(NULL);
    }
    sgemm_set_blocking(0, 32, 0);
    cr_assert(!sgemm_packed_b_usable(p, g_prec, 1, c.k, c.n, c.ldb));
    expect_same(&c, p, 1.0f, 0.0f, "kc override after packing");
    sgemm_set_blocking(0, 0, 0);
    cr_assert(sgemm_packed_b_usable(p, g_prec, 1, c.k, c.n, c.ldb));
    float *other = xmalloc(sizeof(float) * c.n * c.ldb);
    memcpy(other, c.B, sizeof(float) * c.n * c.ldb);
    sgemm(g_prec, 0, 1, c.m, c.n, c.k, 1.0f, c.A, c.lda, c.B, c.ldb, 0.0f, c.C1, c.ldc);
    sgemm_with_packed_b(g_prec, 0, 1, c.m, c.n, c.k, 1.0f, c.A, c.lda, other, c.ldb, p, 0.0f, c.C2, c.ldc);
    cr_assert(memcmp(c.C1, c.C2, sizeof(float) * nc) == 0, "another B must not use this pack");
    cr_assert_null(sgemm_pack_b(g_prec, 1, 0, c.n, c.B, c.ldb));
    sgemm_packed_b_free(p);
    sgemm_packed_b_free(NULL);
    free(other);
    free_case(&c);
}
