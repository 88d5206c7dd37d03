/* attention_op_bf16.c — times op_attention (forward, forward + backward) at a ViT-S block shape,
 * q/k/v sliced out of a permuted [B, T, 3, H, D] projection as the ViT block passes them, in two
 * settings: fp32 storage (fp32 compute) and bf16 storage (bf16 compute; nn/ops_attention_bf16.c).
 * (Until the op layer's precision setting went, a third ran fp32 storage in bf16 compute.) The qkv cast to bf16 happens outside the timed region; the backward starts
 * from a constant dO of o's dtype (backward_with).
 * Standalone program (not part of the endoret binary); build and run from the repo root:
 *   cc -std=c11 -D_GNU_SOURCE -O3 -march=native -fopenmp -I. -o build/attention_op_bf16 \
 *      bench/attention_op_bf16.c nn/tensor.c nn/arena.c nn/autograd.c nn/ops_*.c nn/precision.c \
 *      nn/base/base.c nn/base/rng.c nn/base/process_group.c kernels/cpu/*.c kernels/profile*.c -lm
 *   OMP_NUM_THREADS=2 build/attention_op_bf16 [iters] [mode 0|1: that setting alone, profiled]
 * Prints the median and quartiles in ms; with a mode, the per-kernel profile of that setting. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/profile.h"
#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/ops.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    enum { B = 8, T = 197, H = 6, D = 64, MAX_ITERS = 64 };
    int iters = argc > 1 ? atoi(argv[1]) : 9, only = argc > 2 ? atoi(argv[2]) : -1, perm[5] = {2, 0, 3, 1, 4};
    if (iters < 1 || iters > MAX_ITERS) iters = 9;
    tensor *qkv = tensor_new(5, SHAPE(B, T, 3, H, D));
    float *h = malloc(sizeof(float) * tensor_numel(qkv));
    for (int64_t i = 0; i < tensor_numel(qkv); i++) h[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    tensor_copy_from_host(qkv, h);
    tensor_set_requires_grad(qkv, 1);
    const char *name[2] = {"fp32 storage and compute", "bf16 storage and compute"};
    for (int mode = 0; mode < 2; mode++) {
        if (only >= 0 && mode != only) continue;
        if (only >= 0) prof_start();
        double f[MAX_ITERS], fb[MAX_ITERS];
        for (int it = 0; it <= iters; it++) /* the first one warms up */
            for (int with_bwd = 0; with_bwd < 2; with_bwd++) {
                tensor *x = mode == 1 ? op_cast(qkv, DT_BF16) : qkv;
                tensor *go = tensor_empty_dt(DEV_CPU, mode == 1 ? DT_BF16 : DT_F32, 4, SHAPE(B, H, T, D));
                tensor_fill(go, 0.01f);
                double t0 = now();
                tensor *p = op_permute(x, perm);
                tensor *q = op_squeeze(op_slice(p, 0, 0, 1), 0), *k = op_squeeze(op_slice(p, 0, 1, 2), 0),
                       *v = op_squeeze(op_slice(p, 0, 2, 3), 0);
                tensor *o = op_attention(q, k, v, NULL, MASK_NONE, 0);
                if (!o || (with_bwd && backward_with(o, go))) {
                    fprintf(stderr, "%s\n", er_msg());
                    return 1;
                }
                if (it > 0) (with_bwd ? fb : f)[it - 1] = (now() - t0) * 1e3;
                nn_step_end();
            }
        qsort(f, iters, sizeof *f, cmpd), qsort(fb, iters, sizeof *fb, cmpd);
        printf("%-30s forward %.2f ms [%.2f, %.2f]   forward + backward %.2f ms [%.2f, %.2f]\n", name[mode],
               f[iters / 2], f[iters / 4], f[3 * iters / 4], fb[iters / 2], fb[iters / 4], fb[3 * iters / 4]);
        if (only >= 0) {
            prof_stop();
            prof_report(stdout, 2 * (iters + 1), 0, 0);
        }
    }
    tensor_free(qkv);
    free(h);
    return 0;
}
