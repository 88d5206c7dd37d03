/* cmd_bench_gemm.c — `endoret bench gemm`: GFLOP/s of our sgemm on the model's shapes and, when
 * an OpenBLAS shared library is present on the machine, of OpenBLAS's cblas_sgemm measured in the
 * same run with the same thread count (interleaved rep by rep, so both see the same machine load).
 * `--precision bf16` measures ours in SGEMM_BF16 and SGEMM_FP32 side by side (and OpenBLAS's
 * bf16 cblas_sbgemm when the library exports it). OpenBLAS is only a yardstick: it is dlopen()ed
 * here, never linked into endoret. `--storage` times gemm_ex (a linear layer: bf16 compute, fp32
 * bias) on fp32-stored operands against bf16-stored ones (issue #27), interleaved, and the bf16
 * packing alone from each storage (sgemm_time_pack_bf16). */
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/gemm.h"
#include "cli/common_opts.h"
#include "nn/base/memory.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

typedef struct {
    int tA, tB, m, n, k, batch;
    const char *what;
} shape;

/* 1024^3, the ViT-B/16 products (197 tokens/image; 3152 = 16 images x 197 tokens), and the
 * ResNet-50 convolutions as kernels/cpu/conv.c runs them per image (C[K, PQ] = W[K, CRS] col[CRS,
 * PQ]; 1x1 stride-1 convs take x itself as col; backward data W^T gy, backward filter gy col^T). */
static const shape default_shapes[] = {
    {0, 0, 1024, 1024, 1024, 1, "square"},
    {0, 0, 197, 2304, 768, 1, "qkv projection, 1 image"},
    {0, 0, 197, 768, 768, 1, "attention output proj, 1 image"},
    {0, 0, 3152, 1536, 384, 1, "mlp fc1, 16 images (dim 384)"},
    {0, 0, 3152, 384, 1536, 1, "mlp fc2, 16 images (dim 384)"},
    {0, 1, 197, 2304, 768, 1, "linear forward x W^T"},
    {1, 0, 1536, 384, 3152, 1, "weight grad dY^T x"},
    {0, 1, 197, 197, 64, 12, "attention Q K^T, 12 heads"},
    {0, 0, 197, 64, 197, 12, "attention P V, 12 heads"},
    {0, 0, 64, 3136, 147, 1, "resnet conv1 7x7/2 (a 56-row tile)"},
    {0, 0, 256, 3136, 64, 1, "resnet layer1 1x1 64->256"},
    {0, 0, 64, 3136, 576, 1, "resnet layer1 3x3 64"},
    {0, 0, 128, 784, 1152, 1, "resnet layer2 3x3 128"},
    {0, 0, 256, 392, 2304, 1, "resnet layer3 3x3 256 (2 maps side by side)"},
    {0, 0, 512, 196, 4608, 1, "resnet layer4 3x3 512 (4 maps side by side)"},
    {1, 0, 576, 3136, 64, 1, "resnet 3x3 64 backward data"},
    {0, 1, 64, 576, 3136, 1, "resnet 3x3 64 backward filter"},
    {0, 1, 16, 1000, 2048, 1, "resnet fc, 16 images"},
};

/* cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) */
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef void (*set_threads_fn)(int);
/* cblas_sbgemm: the same with bf16 (uint16) A and B, fp32 alpha/beta/C. */
typedef void (*cblas_sbgemm_fn)(int, int, int, int, int, int, float, const uint16_t *, int,
                                const uint16_t *, int, float, float *, int);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef struct {
    void *lib;
    cblas_sgemm_fn sgemm;
    cblas_sbgemm_fn sbgemm;  /* NULL when not exported (Debian's 0.3.21 build has none) */
    set_threads_fn set_threads;
} openblas;

static int openblas_load(openblas *ob) {
    memset(ob, 0, sizeof *ob);
    /* Idle OpenBLAS threads busy-wait for 2^timeout cycles after each call, which would steal a
     * core from the next measurement of ours; keep that short unless the user chose otherwise. */
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    const char *names[] = {"libopenblas.so.0", "libopenblas.so"};
    for (int i = 0; i < 2 && !ob->lib; i++) ob->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!ob->lib) return 0;
    ob->sgemm = (cblas_sgemm_fn)dlsym(ob->lib, "cblas_sgemm");
    ob->set_threads = (set_threads_fn)dlsym(ob->lib, "openblas_set_num_threads");
    ob->sbgemm = (cblas_sbgemm_fn)dlsym(ob->lib, "cblas_sbgemm");
    if (!ob->sgemm) { dlclose(ob->lib); ob->lib = NULL; return 0; }
    return 1;
}

static void run_ours(int prec, const shape *s, const float *A, const float *B, float *C) {
    int lda = s->tA ? s->m : s->k, ldb = s->tB ? s->k : s->n;
    if (s->batch == 1)
        sgemm(prec, s->tA, s->tB, s->m, s->n, s->k, 1.0f, A, lda, B, ldb, 0.0f, C, s->n);
    else
        sgemm_strided_batched(prec, s->tA, s->tB, s->m, s->n, s->k, 1.0f, A, lda, (long)s->m * s->k, B,
                              ldb, (long)s->k * s->n, 0.0f, C, s->n, (long)s->m * s->n, s->batch);
}

/* OpenBLAS on each batch element: cblas_sgemm on A, B, or cblas_sbgemm when bf16 inputs A16, B16 are given. */
static void run_openblas(const openblas *ob, const shape *s, const float *A, const float *B, const uint16_t *A16,
                         const uint16_t *B16, float *C) {
    int lda = s->tA ? s->m : s->k, ldb = s->tB ? s->k : s->n;
    int ta = s->tA ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = s->tB ? CBLAS_TRANS : CBLAS_NO_TRANS;
    long sa = (long)s->m * s->k, sb = (long)s->k * s->n, sc = (long)s->m * s->n; /* batch strides */
    for (int b = 0; b < s->batch; b++) {
        if (A16) ob->sbgemm(CBLAS_ROW_MAJOR, ta, tb, s->m, s->n, s->k, 1.0f, A16 + b * sa, lda, B16 + b * sb, ldb, 0.0f, C + b * sc, s->n);
        else ob->sgemm(CBLAS_ROW_MAJOR, ta, tb, s->m, s->n, s->k, 1.0f, A + b * sa, lda, B + b * sb, ldb, 0.0f, C + b * sc, s->n);
    }
}

/* --ukernels: each compiled micro-kernel this CPU runs, timed by sgemm_time_ukernel. */
static void bench_ukernels(int json) {
    sgemm_ukernel_speed u;
    for (int i = 0; sgemm_time_ukernel(i, &u); i++) {
        if (json) printf("{\"ukernel\":\"%s\",\"mr\":%d,\"nr\":%d,\"kc\":%d,\"gflops_best\":%.2f}\n", u.name, u.mr, u.nr, u.kc, u.gflops_best);
        else printf("%-16s %2d x %-2d  kc=%d  %6.1f GFLOP/s (best of 15, 1 thread, panels in L1)\n", u.name, u.mr, u.nr, u.kc, u.gflops_best);
    }
}

/* fp32 -> bf16 bit patterns (round to nearest even), for cblas_sbgemm's inputs. */
static uint16_t *to_bf16(const float *x, long n) {
    float *r = xmalloc(sizeof(float) * n);
    memcpy(r, x, sizeof(float) * n);
    gemm_round_bf16(r, n);
    uint16_t *h = xmalloc(sizeof(uint16_t) * n);
    for (long i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &r[i], 4);
        h[i] = (uint16_t)(u >> 16);
    }
    free(r);
    return h;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "MxNxK", optionally "B@MxNxK" (batch) and ":nn|nt|tn|tt"; comma separated. */
static int parse_shapes(const char *text, shape **out, int *count) {
    int cap = 1;
    for (const char *p = text; *p; p++) cap += *p == ',';
    shape *v = xcalloc(cap, sizeof *v);
    int n = 0;
    const char *p = text;
    while (*p) {
        shape s = {0, 0, 0, 0, 0, 1, "custom"};
        char tr[3] = "nn";
        int used = 0;
        if (sscanf(p, "%d@%dx%dx%d%n", &s.batch, &s.m, &s.n, &s.k, &used) != 4) {
            s.batch = 1;
            if (sscanf(p, "%dx%dx%d%n", &s.m, &s.n, &s.k, &used) != 3) goto bad;
        }
        p += used;
        if (*p == ':') {
            if (!(p[1] == 'n' || p[1] == 't') || !(p[2] == 'n' || p[2] == 't')) goto bad;
            tr[0] = p[1], tr[1] = p[2];
            p += 3;
        }
        if (s.m < 1 || s.n < 1 || s.k < 1 || s.batch < 1) goto bad;
        { /* A, B, C and the reference's C, allocated per shape: refused when they cannot fit */
            mem_estimate e = {0};
            e.data = 4.0 * s.batch * ((double)s.m * s.k + (double)s.k * s.n + 2.0 * s.m * s.n);
            char what[96];
            snprintf(what, sizeof what, "--shapes %d@%dx%dx%d", s.batch, s.m, s.n, s.k);
            int rc = mem_check(&e, what, "the shape");
            if (rc) { free(v); return rc; }
        }
        s.tA = tr[0] == 't', s.tB = tr[1] == 't';
        v[n++] = s;
        if (*p == ',') p++;
        else if (*p) goto bad;
    }
    if (!n) goto bad;
    *out = v, *count = n;
    return ER_OK;
bad:
    free(v);
    return er_fail(ER_INPUT, "--shapes: cannot parse '%s' (expected e.g. 1024x1024x1024,197x2304x768:nt,12@197x197x64:nt)", text);
}

/* `--storage`: per shape (batch 1), gemm_ex with GEMM_COMPUTE_BF16 and a bias as a linear layer
 * runs it, on (0) fp32 A, B and D (today's layers), (1) bf16 A and B, fp32 D, (2) bf16 A, B and D;
 * every rep times each in turn after an untimed call. Same values in every storage (bf16-exact). */
static void bench_storage(const shape *shapes, int nshapes, int threads, int reps, int json) {
    const er_backend *cpu = backend_get(DEV_CPU);
    static const char *names[3] = {"fp32 A/B/D", "bf16 A/B, fp32 D", "bf16 A/B/D"};
    if (!json)
        printf("gemm_ex, bf16 compute + fp32 bias, %d threads, %d reps (each after an untimed call), median GFLOP/s "
               "(slowest-fastest); kernel %s\n%-16s %-2s %17s %17s %17s %8s %8s\n", threads, reps,
               sgemm_kernel_name(SGEMM_BF16), "m x n x k", "op", names[0], names[1], names[2], "1/0", "2/0");
    double *t[3];
    for (int c = 0; c < 3; c++) t[c] = xmalloc(sizeof(double) * reps);
    for (int si = 0; si < nshapes; si++) {
        const shape *s = &shapes[si];
        if (s->batch != 1) continue;
        long na = (long)s->m * s->k, nb = (long)s->k * s->n, nd = (long)s->m * s->n;
        float *A = xmalloc_aligned(4 * na), *B = xmalloc_aligned(4 * nb), *D = xmalloc_aligned(4 * nd);
        float *bias = xmalloc(4 * s->n), *work = xmalloc_aligned(4 * nd);
        uint16_t *Ah, *Bh, *Dh = xmalloc_aligned(2 * nd);
        rng_t r = rng_make(1234, rng_stream(7, (uint32_t)si, 0));
        for (long i = 0; i < na; i++) A[i] = 2.0f * rng_uniform(&r) - 1.0f;
        for (long i = 0; i < nb; i++) B[i] = 2.0f * rng_uniform(&r) - 1.0f;
        for (int j = 0; j < s->n; j++) bias[j] = 0.01f * j;
        gemm_round_bf16(A, na), gemm_round_bf16(B, nb); /* the same values in both storages */
        Ah = to_bf16(A, na), Bh = to_bf16(B, nb);
        for (int rep = 0; rep < reps; rep++)
            for (int c = 0; c < 3; c++)
                for (int timed = 0; timed <= 1; timed++) {
                    gemm_ex_args a = {.transA = s->tA, .transB = s->tB, .m = s->m, .n = s->n, .k = s->k, .alpha = 1.0f,
                                      .A = c ? (const void *)Ah : A, .lda = s->tA ? s->m : s->k,
                                      .B = c ? (const void *)Bh : B, .ldb = s->tB ? s->k : s->n,
                                      .D = c == 2 ? (void *)Dh : D, .ldd = s->n, .bias = bias,
                                      .a_type = c ? GEMM_BF16 : GEMM_F32, .b_type = c ? GEMM_BF16 : GEMM_F32,
                                      .d_type = c == 2 ? GEMM_BF16 : GEMM_F32, .compute = GEMM_COMPUTE_BF16,
                                      .work = work};
                    double t0 = now_seconds();
                    cpu->gemm_ex(&a);
                    if (timed) t[c][rep] = now_seconds() - t0;
                }
        double flops = 2.0 * s->m * s->n * s->k, g[3], gb[3], gw[3];
        for (int c = 0; c < 3; c++) {
            qsort(t[c], reps, sizeof(double), cmp_double);
            g[c] = flops / t[c][reps / 2] * 1e-9, gb[c] = flops / t[c][0] * 1e-9, gw[c] = flops / t[c][reps - 1] * 1e-9;
        }
        char op[3] = {s->tA ? 't' : 'n', s->tB ? 't' : 'n', 0}, dims[48], col[3][32];
        snprintf(dims, sizeof dims, "%dx%dx%d", s->m, s->n, s->k);
        if (json) {
            printf("{\"bench\":\"gemm_ex_storage\",\"m\":%d,\"n\":%d,\"k\":%d,\"transA\":%d,\"transB\":%d,"
                   "\"threads\":%d,\"reps\":%d,\"fp32_gflops\":%.2f,\"bf16_ab_gflops\":%.2f,\"bf16_abd_gflops\":%.2f}\n",
                   s->m, s->n, s->k, s->tA, s->tB, threads, reps, g[0], g[1], g[2]);
        } else {
            for (int c = 0; c < 3; c++) snprintf(col[c], sizeof col[c], "%5.0f (%3.0f-%3.0f)", g[c], gw[c], gb[c]);
            printf("%-16s %-2s %17s %17s %17s %7.2fx %7.2fx  %s\n", dims, op, col[0], col[1], col[2], g[1] / g[0],
                   g[2] / g[0], s->what);
        }
        double us[4];
        if (sgemm_time_pack_bf16(s->tA, s->tB, s->m, s->n, s->k, us)) {
            if (json)
                printf("{\"bench\":\"gemm_pack_bf16\",\"m\":%d,\"n\":%d,\"k\":%d,\"transA\":%d,\"transB\":%d,"
                       "\"a_from_fp32_us\":%.1f,\"a_from_bf16_us\":%.1f,\"b_from_fp32_us\":%.1f,\"b_from_bf16_us\":%.1f}\n",
                       s->m, s->n, s->k, s->tA, s->tB, us[0], us[1], us[2], us[3]);
            else
                printf("%-16s    packing alone (1 thread, best of 200): A from fp32 %.1f us, from bf16 %.1f us; "
                       "B from fp32 %.1f us, from bf16 %.1f us\n", dims, us[0], us[1], us[2], us[3]);
        }
        fflush(stdout);
        free(A), free(B), free(D), free(bias), free(work), free(Ah), free(Bh), free(Dh);
    }
    for (int c = 0; c < 3; c++) free(t[c]);
}

int cmd_bench_gemm(int argc, char **argv) {
    int threads = omp_get_max_threads(), reps = 7, json = 0, mc = 0, kc = 0, nc = 0, no_ref = 0,
        ukernels = 0, storage = 0;
    const char *kernel_name = NULL, *shapes_text = NULL, *precision_text = NULL;
    arg_spec specs[] = {
        OPT_THREADS(&threads, .def = "OpenMP's count"),
        {"reps", ARG_INT, &reps, "timed repetitions per shape and contender, each after an untimed call (median and spread reported)",
         "[1, 10000]"},
        OPT_JSON(&json),
        {"shapes", ARG_STR, &shapes_text, "e.g. 1024x1024x1024,197x2304x768:nt,12@197x197x64:nt"},
        {"kernel", ARG_STR, &kernel_name, "micro-kernel: avx512, avx2, scalar or a full name"},
        {"mc", ARG_INT, &mc, "override rows of A per block (tuning)"},
        {"kc", ARG_INT, &kc, "override depth per block (tuning)"},
        {"nc", ARG_INT, &nc, "override columns of B per block (tuning)"},
        {"no-openblas", ARG_FLAG, &no_ref, "do not look for OpenBLAS"},
        {"ukernels", ARG_FLAG, &ukernels, "only measure each micro-kernel with its data in L1"},
        {"storage", ARG_FLAG, &storage, "only gemm_ex as a linear layer (bf16 compute, bias) on fp32- vs bf16-stored "
                                        "operands and output"},
        {"precision", ARG_STR, &precision_text, "fp32, or bf16 (ours in bf16 and fp32, OpenBLAS sgemm and sbgemm, "
                                                "interleaved)", "fp32|bf16", .def = "fp32"},
    };
    int rc = args_parse(argc, argv, specs, (int)(sizeof specs / sizeof specs[0]),
                        "endoret bench gemm [--threads T] [--reps R] [--json] [--precision fp32|bf16]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if ((rc = args_range("threads", threads, 1, ARGS_MAX_THREADS))) return rc; /* both libraries need a count */
    if (kernel_name && sgemm_use_kernel(kernel_name))
        return er_fail(ER_INPUT, "--kernel: '%s' is unknown or not supported by this CPU", kernel_name);
    const int bf16 = precision_text && !strcmp(precision_text, "bf16");
    sgemm_set_blocking(mc, kc, nc);
    if (ukernels) { bench_ukernels(json); return ER_OK; }

    const shape *shapes = default_shapes;
    shape *custom = NULL;
    int nshapes = (int)(sizeof default_shapes / sizeof default_shapes[0]);
    if (shapes_text) {
        if ((rc = parse_shapes(shapes_text, &custom, &nshapes))) return rc;
        shapes = custom;
    }

    omp_set_num_threads(threads);
    if (storage) {
        bench_storage(shapes, nshapes, threads, reps, json);
        free(custom);
        return ER_OK;
    }
    openblas ob;
    int have_ob = !no_ref && openblas_load(&ob);
    if (have_ob && ob.set_threads) ob.set_threads(threads);
    /* Contenders, timed in this order in every rep: ours in the chosen (or environment's)
     * precision; with --precision bf16 also ours in fp32; OpenBLAS sgemm; OpenBLAS sbgemm. */
    enum { C_OURS, C_OURS_FP32, C_OB, C_SB, C_N };
    int on[C_N] = {1, bf16, have_ob, have_ob && bf16 && ob.sbgemm != NULL};
    const int main_prec = bf16 ? SGEMM_BF16 : SGEMM_FP32;
    if (!json) {
        printf("sgemm %s (%s), %d threads, %d reps (each after an untimed call), median GFLOP/s (slowest-fastest rep)\n",
               sgemm_kernel_name(main_prec), main_prec == SGEMM_BF16 ? "bf16 inputs, fp32 accumulation" : "fp32",
               threads, reps);
        printf("OpenBLAS: %s\n", have_ob ? "found (dlopen), measured interleaved with ours" : "not found, ours only");
        if (bf16)
            printf("OpenBLAS cblas_sbgemm: %s\n", !have_ob ? "-" : on[C_SB] ? "exported, measured (bf16 reference)"
                                                                     : "not exported by this build");
        if (bf16)
            printf("%-16s %-2s %-6s %17s %17s %17s %17s %7s %7s  %s\n", "m x n x k", "op", "tile", "ours bf16",
                   "ours fp32", "openblas", "sbgemm", "bf/fp32", "bf/ob", "what");
        else
            printf("%-16s %-2s %-6s %17s %17s %7s  %s\n", "m x n x k", "op", "tile", "ours", "openblas", "ratio", "what");
    }

    double *t[C_N];
    for (int c = 0; c < C_N; c++) t[c] = xmalloc(sizeof(double) * reps);
    for (int si = 0; si < nshapes; si++) {
        const shape *s = &shapes[si];
        long na = (long)s->batch * s->m * s->k, nb = (long)s->batch * s->k * s->n,
             ncl = (long)s->batch * s->m * s->n;
        float *A = xmalloc_aligned(sizeof(float) * na), *B = xmalloc_aligned(sizeof(float) * nb),
              *C = xmalloc_aligned(sizeof(float) * ncl);
        rng_t r = rng_make(1234, rng_stream(7, (uint32_t)si, 0));
        for (long i = 0; i < na; i++) A[i] = 2.0f * rng_uniform(&r) - 1.0f;
        for (long i = 0; i < nb; i++) B[i] = 2.0f * rng_uniform(&r) - 1.0f;
        uint16_t *Ah = NULL, *Bh = NULL;
        if (on[C_SB]) Ah = to_bf16(A, na), Bh = to_bf16(B, nb);
        double flops = 2.0 * s->batch * s->m * s->n * s->k;

        /* Each rep, each contender in turn: one untimed call, then the timed one. The untimed call
         * wakes this contender's threads and lets the other library's go idle (OpenBLAS's spin for
         * 2^4 cycles here), so neither is timed against the other's threads or a cold start; a
         * pause between them was worse: on these VMs a core idle for 20 ms takes milliseconds to
         * come back (measured: 1024^3 of ours at 228-340 GFLOP/s after 20 ms sleeps, 470 without). */
        for (int rep = 0; rep < reps; rep++)
            for (int c = 0; c < C_N; c++) {
                if (!on[c]) continue;
                for (int timed = 0; timed <= 1; timed++) {
                    double t0 = now_seconds();
                    if (c <= C_OURS_FP32) run_ours(c == C_OURS ? main_prec : SGEMM_FP32, s, A, B, C);
                    else if (c == C_OB) run_openblas(&ob, s, A, B, NULL, NULL, C);
                    else run_openblas(&ob, s, NULL, NULL, Ah, Bh, C);
                    if (timed) t[c][rep] = now_seconds() - t0;
                }
            }
        /* median, and the spread over the reps: slowest (gw) and fastest (gb) */
        double g[C_N] = {0}, gb[C_N] = {0}, gw[C_N] = {0};
        for (int c = 0; c < C_N; c++) {
            if (!on[c]) continue;
            qsort(t[c], reps, sizeof(double), cmp_double);
            g[c] = flops / t[c][reps / 2] * 1e-9, gb[c] = flops / t[c][0] * 1e-9;
            gw[c] = flops / t[c][reps - 1] * 1e-9;
        }
        char dims[48], op[3] = {s->tA ? 't' : 'n', s->tB ? 't' : 'n', 0};
        const char *kname = sgemm_kernel_for(main_prec, s->tA, s->m, s->n), *tile = strchr(kname, '-');
        tile = tile ? tile + 1 : kname;
        if (s->batch > 1) snprintf(dims, sizeof dims, "%d@%dx%dx%d", s->batch, s->m, s->n, s->k);
        else snprintf(dims, sizeof dims, "%dx%dx%d", s->m, s->n, s->k);
        if (json) {
            printf("{\"m\":%d,\"n\":%d,\"k\":%d,\"batch\":%d,\"transA\":%d,\"transB\":%d,\"threads\":%d,"
                   "\"reps\":%d,\"precision\":\"%s\",\"kernel\":\"%s\",\"gflops\":%.2f,\"gflops_best\":%.2f,\"gflops_worst\":%.2f",
                   s->m, s->n, s->k, s->batch, s->tA, s->tB, threads, reps,
                   main_prec == SGEMM_BF16 ? "bf16" : "fp32", kname, g[C_OURS], gb[C_OURS], gw[C_OURS]);
            if (on[C_OURS_FP32])
                printf(",\"fp32_gflops\":%.2f,\"fp32_gflops_best\":%.2f,\"ratio_fp32\":%.3f",
                       g[C_OURS_FP32], gb[C_OURS_FP32], g[C_OURS] / g[C_OURS_FP32]);
            if (have_ob)
                printf(",\"openblas_gflops\":%.2f,\"openblas_gflops_best\":%.2f,\"openblas_gflops_worst\":%.2f,"
                       "\"ratio\":%.3f", g[C_OB], gb[C_OB], gw[C_OB], g[C_OURS] / g[C_OB]);
            if (on[C_SB])
                printf(",\"sbgemm_gflops\":%.2f,\"sbgemm_gflops_best\":%.2f", g[C_SB], gb[C_SB]);
            printf("}\n");
        } else {
            char col[C_N][32], rat[2][16];
            for (int c = 0; c < C_N; c++)
                if (on[c]) snprintf(col[c], sizeof col[c], "%5.0f (%3.0f-%3.0f)", g[c], gw[c], gb[c]);
                else snprintf(col[c], sizeof col[c], "-");
            snprintf(rat[0], sizeof rat[0], "%6.2fx", g[C_OURS] / g[C_OURS_FP32]);
            if (have_ob) snprintf(rat[1], sizeof rat[1], "%6.2fx", g[C_OURS] / g[C_OB]);
            else snprintf(rat[1], sizeof rat[1], "-");
            if (bf16)
                printf("%-16s %-2s %-6s %17s %17s %17s %17s %7s %7s  %s\n", dims, op, tile, col[C_OURS],
                       col[C_OURS_FP32], col[C_OB], col[C_SB], rat[0], rat[1], s->what);
            else
                printf("%-16s %-2s %-6s %17s %17s %7s  %s\n", dims, op, tile, col[C_OURS], col[C_OB], rat[1], s->what);
        }
        fflush(stdout);
        free(A), free(B), free(C), free(Ah), free(Bh);
    }
    for (int c = 0; c < C_N; c++) free(t[c]);
    free(custom);
    /* The OpenBLAS handle is deliberately not dlclose()d: its worker threads may still be parked. */
    return ER_OK;
}
