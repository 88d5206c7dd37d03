/* attention_step.c — times the CPU attention kernels alone (forward, backward) at ViT shapes:
 * q/k/v as strided views of one packed [B, T, 3, H, D] projection, as a ViT block passes them.
 * Standalone program (not part of the endoret binary); build and run from the repo root:
 *   cc -std=c11 -D_GNU_SOURCE -O3 -march=native -fopenmp -I. -o build/attention_step \
 *      bench/attention_step.c kernels/cpu/attention*.c kernels/cpu/simd_avx512.c kernels/cpu/gemm*.c \
 *      kernels/cpu/cpu_info.c nn/base/base.c -lm
 *   OMP_NUM_THREADS=2 build/attention_step [B] [H] [T] [D] [iters] [fp32|bf16]   (default 16 6 197 64 20 fp32)
 * The last argument is the products' precision. Prints median and quartiles of each, in ms,
 * and GFLOP/s at the median (forward 4 T^2 D per head, backward with the recompute 10 T^2 D). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/gemm.h"
#include "nn/base/base.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ATTN_CPUTIME=1: process CPU seconds instead of wall seconds (on a machine shared with other jobs,
 * what the kernel itself consumed; meaningful with 1 thread and OMP_WAIT_POLICY=passive) */
static double clock_now(void) {
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("ATTN_CPUTIME") && atoi(getenv("ATTN_CPUTIME")) > 0;
    if (!cpu) return now_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *rnd(int64_t n, unsigned s) {
    float *p = xmalloc_aligned((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)(((s = s * 1103515245u + 12345u) >> 8) & 0xffff) / 32768.0f - 1.0f;
    return p;
}

int main(int argc, char **argv) {
    int B = argc > 1 ? atoi(argv[1]) : 16, H = argc > 2 ? atoi(argv[2]) : 6, T = argc > 3 ? atoi(argv[3]) : 197;
    int D = argc > 4 ? atoi(argv[4]) : 64, iters = argc > 5 ? atoi(argv[5]) : 20;
    if (argc > 6 && strcmp(argv[6], "bf16") && strcmp(argv[6], "fp32"))
        return fprintf(stderr, "precision '%s': expected fp32 or bf16\n", argv[6]), 2;
    const int bf16 = argc > 6 && !strcmp(argv[6], "bf16"), compute = bf16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32;
    if (B < 1 || H < 1 || T < 1 || D < 1 || iters < 1 || iters > 1000) return fprintf(stderr, "bad arguments\n"), 2;
    int64_t C = (int64_t)H * D, R = (int64_t)B * T;
    float *qkv = rnd(R * 3 * C, 1), *o = rnd(R * C, 2), *go = rnd(R * C, 3), *g = rnd(R * 3 * C, 4);
    float *lse = rnd((int64_t)B * H * T, 5);
    float *work = xmalloc_aligned(cpu_attention_workspace(compute, B, H, T, T, D) * sizeof(float));
    int64_t qs[3] = {T * 3 * C, D, 3 * C}, os[3] = {T * C, D, C};
    double *tf = xmalloc(sizeof(double) * iters), *tb = xmalloc(sizeof(double) * iters);
    for (int it = -2; it < iters; it++) { /* two warm-up calls */
        double t0 = clock_now();
        cpu_attention(compute, B, H, T, T, D, 0.125f, qkv, qs, qkv + C, qs, qkv + 2 * C, qs, MASK_NONE, NULL, qs, o, os, lse, work);
        double t1 = clock_now();
        cpu_attention_backward(compute, B, H, T, T, D, 0.125f, qkv, qs, qkv + C, qs, qkv + 2 * C, qs, MASK_NONE, NULL, qs, o, os,
                               go, os, lse, g, qs, g + C, qs, g + 2 * C, qs, work);
        double t2 = clock_now();
        if (it >= 0) tf[it] = (t1 - t0) * 1e3, tb[it] = (t2 - t1) * 1e3;
    }
    qsort(tf, iters, sizeof *tf, cmp);
    qsort(tb, iters, sizeof *tb, cmp);
    double fl = (double)B * H * T * T * D;
    printf("attention B%d H%d T%d D%d %s, %d threads, %d iters: forward %.2f ms [%.2f, %.2f] %.0f GFLOP/s, "
           "backward %.2f ms [%.2f, %.2f] %.0f GFLOP/s\n",
           B, H, T, D, bf16 ? "bf16" : "fp32", omp_get_max_threads(), iters, tf[iters / 2],
           tf[iters / 4], tf[3 * iters / 4], 4 * fl / tf[iters / 2] * 1e-6, tb[iters / 2], tb[iters / 4],
           tb[3 * iters / 4], 10 * fl / tb[iters / 2] * 1e-6);
    return 0;
}
