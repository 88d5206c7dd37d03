/* cmd_bench_gemm.c — `endoret bench gemm`: GFLOP/s of our sgemm on the model's shapes and, when
 * an OpenBLAS shared library is present on the machine, of OpenBLAS's cblas_sgemm measured in the
 * same run with the same thread count (interleaved rep by rep, so both see the same machine load).
 * OpenBLAS is only a yardstick: it is dlopen()ed here, never linked into endoret. */
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_internal.h"
#include "nn/args.h"
#include "nn/base.h"
#include "nn/rng.h"

typedef struct {
    int tA, tB, m, n, k, batch;
    const char *what;
} shape;

/* 1024^3 plus the ViT-B/16 products (197 tokens/image; 3152 = 16 images x 197 tokens). */
static const shape default_shapes[] = {
    {0, 0, 1024, 1024, 1024, 1, "square"},
    {0, 0, 197, 2304, 768, 1, "qkv projection, 1 image"},
    {0, 0, 197, 768, 768, 1, "attention output proj, 1 image"},
    {0, 0, 3152, 1536, 384, 1, "mlp fc1, 16 images (dim 384)"},
    {0, 0, 3152, 384, 1536, 1, "mlp fc2, 16 images (dim 384)"},
    {0, 1, 197, 2304, 768, 1, "linear forward x W^T"},
    {1, 0, 1536, 384, 3152, 1, "weight grad dY^T x"},
    {0, 1, 197, 197, 64, 12, "attention Q K^T, 12 heads"},
};

/* cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) */
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef void (*set_threads_fn)(int);
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef struct {
    void *lib;
    cblas_sgemm_fn sgemm;
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
    if (!ob->sgemm) { dlclose(ob->lib); ob->lib = NULL; return 0; }
    return 1;
}

static void run_ours(const shape *s, const float *A, const float *B, float *C) {
    int lda = s->tA ? s->m : s->k, ldb = s->tB ? s->k : s->n;
    if (s->batch == 1)
        sgemm(s->tA, s->tB, s->m, s->n, s->k, 1.0f, A, lda, B, ldb, 0.0f, C, s->n);
    else
        sgemm_strided_batched(s->tA, s->tB, s->m, s->n, s->k, 1.0f, A, lda, (long)s->m * s->k, B,
                              ldb, (long)s->k * s->n, 0.0f, C, s->n, (long)s->m * s->n, s->batch);
}

static void run_openblas(const openblas *ob, const shape *s, const float *A, const float *B, float *C) {
    int lda = s->tA ? s->m : s->k, ldb = s->tB ? s->k : s->n;
    for (int b = 0; b < s->batch; b++)
        ob->sgemm(CBLAS_ROW_MAJOR, s->tA ? CBLAS_TRANS : CBLAS_NO_TRANS,
                  s->tB ? CBLAS_TRANS : CBLAS_NO_TRANS, s->m, s->n, s->k, 1.0f,
                  A + (long)b * s->m * s->k, lda, B + (long)b * s->k * s->n, ldb, 0.0f,
                  C + (long)b * s->m * s->n, s->n);
}

/* --ukernels: each compiled micro-kernel this CPU runs, on one thread, with its packed panels in
 * L1 (kc = 256, 8 A panels in turn): the in-core ceiling, free of packing and cache misses. */
static void bench_ukernels(int json) {
    const gemm_kernel *(*sets[])(int *) = {gemm_kernels_avx512, gemm_kernels_avx2, gemm_kernels_scalar};
    const int kc = 256, calls = 2000;
    for (int si = 0; si < 3; si++) {
        int count;
        const gemm_kernel *ks = sets[si](&count);
        if (!count || (!strcmp(ks[0].isa, "avx512") && !cpu_has_avx512()) ||
            (!strcmp(ks[0].isa, "avx2") && !cpu_has_avx2_fma()))
            continue;
        for (int i = 0; i < count; i++) {
            const gemm_kernel *K = &ks[i];
            float *Ap = xmalloc_aligned(sizeof(float) * K->mr * kc * 8),
                  *Bp = xmalloc_aligned(sizeof(float) * K->nr * kc),
                  *C = xmalloc_aligned(sizeof(float) * K->mr * K->nr * 8);
            for (long j = 0; j < (long)K->mr * kc * 8; j++) Ap[j] = 1e-3f * (float)(j % 7);
            for (long j = 0; j < (long)K->nr * kc; j++) Bp[j] = 1e-3f * (float)(j % 5);
            memset(C, 0, sizeof(float) * K->mr * K->nr * 8);
            double best = 1e30;
            for (int rep = 0; rep < 15; rep++) {
                double t0 = now_seconds();
                for (int c = 0; c < calls; c++)
                    K->fn(kc, Ap + (long)(c & 7) * K->mr * kc, Bp, C + (long)(c & 7) * K->mr * K->nr,
                          K->nr, 1.0f, 1.0f, K->mr, K->nr);
                double t = now_seconds() - t0;
                if (t < best) best = t;
            }
            double g = 2.0 * K->mr * K->nr * kc * calls / best * 1e-9;
            if (json) printf("{\"ukernel\":\"%s\",\"mr\":%d,\"nr\":%d,\"kc\":%d,\"gflops_best\":%.2f}\n", K->name, K->mr, K->nr, kc, g);
            else printf("%-14s %2d x %-2d  kc=%d  %6.1f GFLOP/s (best of 15, 1 thread, panels in L1)\n", K->name, K->mr, K->nr, kc, g);
            free(Ap), free(Bp), free(C);
        }
    }
}

static void pause_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
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

int cmd_bench_gemm(int argc, char **argv) {
    int threads = omp_get_max_threads(), reps = 7, json = 0, mc = 0, kc = 0, nc = 0, no_ref = 0,
        ukernels = 0;
    const char *kernel_name = NULL, *shapes_text = NULL;
    arg_spec specs[] = {
        {"threads", ARG_INT, &threads, "threads for ours and OpenBLAS (default: OpenMP's)"},
        {"reps", ARG_INT, &reps, "timed repetitions per shape after one warm-up (median reported)"},
        {"json", ARG_FLAG, &json, "one JSON object per line per shape"},
        {"shapes", ARG_STR, &shapes_text, "e.g. 1024x1024x1024,197x2304x768:nt,12@197x197x64:nt"},
        {"kernel", ARG_STR, &kernel_name, "micro-kernel: avx512, avx2, scalar or a full name"},
        {"mc", ARG_INT, &mc, "override rows of A per block (tuning)"},
        {"kc", ARG_INT, &kc, "override depth per block (tuning)"},
        {"nc", ARG_INT, &nc, "override columns of B per block (tuning)"},
        {"no-openblas", ARG_FLAG, &no_ref, "do not look for OpenBLAS"},
        {"ukernels", ARG_FLAG, &ukernels, "only measure each micro-kernel with its data in L1"},
    };
    char **pos = NULL;
    int npos = 0;
    int rc = args_parse(argc, argv, specs, (int)(sizeof specs / sizeof specs[0]),
                        "endoret bench gemm [--threads T] [--reps R] [--json]", &pos, &npos);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    free(pos);
    if (npos) return er_fail(ER_INPUT, "bench gemm: unexpected argument");
    if (threads < 1 || threads > 1024) return er_fail(ER_INPUT, "--threads: expected 1..1024, got %d", threads);
    if (reps < 1 || reps > 10000) return er_fail(ER_INPUT, "--reps: expected 1..10000, got %d", reps);
    if (kernel_name && sgemm_use_kernel(kernel_name))
        return er_fail(ER_INPUT, "--kernel: '%s' is unknown or not supported by this CPU", kernel_name);
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
    openblas ob;
    int have_ob = !no_ref && openblas_load(&ob);
    if (have_ob && ob.set_threads) ob.set_threads(threads);
    if (!json) {
        printf("sgemm %s, %d threads, %d reps after 1 warm-up, median GFLOP/s (best in brackets)\n",
               sgemm_kernel_name(), threads, reps);
        printf("OpenBLAS: %s\n", have_ob ? "found (dlopen), measured interleaved with ours" : "not found, ours only");
        printf("%-16s %-2s %-6s %11s %11s %7s  %s\n", "m x n x k", "op", "tile", "ours", "openblas", "ratio", "what");
    }

    double *t_ours = xmalloc(sizeof(double) * reps), *t_ob = xmalloc(sizeof(double) * reps);
    for (int si = 0; si < nshapes; si++) {
        const shape *s = &shapes[si];
        long na = (long)s->batch * s->m * s->k, nb = (long)s->batch * s->k * s->n,
             ncl = (long)s->batch * s->m * s->n;
        float *A = xmalloc_aligned(sizeof(float) * na), *B = xmalloc_aligned(sizeof(float) * nb),
              *C = xmalloc_aligned(sizeof(float) * ncl);
        rng_t r = rng_make(1234, rng_stream(7, (uint32_t)si, 0));
        for (long i = 0; i < na; i++) A[i] = 2.0f * rng_uniform(&r) - 1.0f;
        for (long i = 0; i < nb; i++) B[i] = 2.0f * rng_uniform(&r) - 1.0f;
        double flops = 2.0 * s->batch * s->m * s->n * s->k;

        run_ours(s, A, B, C);
        if (have_ob) run_openblas(&ob, s, A, B, C);
        for (int rep = 0; rep < reps; rep++) {
            /* Short pauses let the other library's idle threads stop spinning before we time. */
            if (have_ob) pause_ms(20);
            double t0 = now_seconds();
            run_ours(s, A, B, C);
            t_ours[rep] = now_seconds() - t0;
            if (have_ob) {
                pause_ms(20);
                t0 = now_seconds();
                run_openblas(&ob, s, A, B, C);
                t_ob[rep] = now_seconds() - t0;
            }
        }
        qsort(t_ours, reps, sizeof(double), cmp_double);
        double g = flops / t_ours[reps / 2] * 1e-9, gbest = flops / t_ours[0] * 1e-9, go = 0, gobest = 0;
        if (have_ob) {
            qsort(t_ob, reps, sizeof(double), cmp_double);
            go = flops / t_ob[reps / 2] * 1e-9, gobest = flops / t_ob[0] * 1e-9;
        }
        char dims[48], op[3] = {s->tA ? 't' : 'n', s->tB ? 't' : 'n', 0};
        const char *kname = sgemm_kernel_for(s->tA, s->m, s->n), *tile = strchr(kname, '-');
        tile = tile ? tile + 1 : kname;
        if (s->batch > 1) snprintf(dims, sizeof dims, "%d@%dx%dx%d", s->batch, s->m, s->n, s->k);
        else snprintf(dims, sizeof dims, "%dx%dx%d", s->m, s->n, s->k);
        if (json) {
            printf("{\"m\":%d,\"n\":%d,\"k\":%d,\"batch\":%d,\"transA\":%d,\"transB\":%d,\"threads\":%d,"
                   "\"reps\":%d,\"kernel\":\"%s\",\"gflops\":%.2f,\"gflops_best\":%.2f",
                   s->m, s->n, s->k, s->batch, s->tA, s->tB, threads, reps, kname, g, gbest);
            if (have_ob)
                printf(",\"openblas_gflops\":%.2f,\"openblas_gflops_best\":%.2f,\"ratio\":%.3f", go,
                       gobest, g / go);
            printf("}\n");
        } else if (have_ob) {
            printf("%-16s %-2s %-6s %5.1f (%3.0f) %5.1f (%3.0f) %6.2fx  %s\n", dims, op, tile, g, gbest, go,
                   gobest, g / go, s->what);
        } else {
            printf("%-16s %-2s %-6s %5.1f (%3.0f) %11s %7s  %s\n", dims, op, tile, g, gbest, "-", "-", s->what);
        }
        fflush(stdout);
        free(A), free(B), free(C);
    }
    free(t_ours), free(t_ob), free(custom);
    /* The OpenBLAS handle is deliberately not dlclose()d: its worker threads may still be parked. */
    return ER_OK;
}
