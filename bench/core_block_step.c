/* core_block_step.c — times one pre-norm ViT block (forward + backward) built from nn/ops.h:
 * the op layer + CPU kernels + sgemm together, as a training step uses them.
 * Standalone program (not part of the endoret binary); build and run from the repo root:
 *   cc -std=c11 -D_GNU_SOURCE -O3 -march=native -fopenmp -I. -o build/core_block_step \
 *      bench/core_block_step.c nn/tensor.c nn/arena.c nn/autograd.c nn/ops_*.c nn/precision.c \
 *      nn/base/base.c nn/base/rng.c nn/base/process_group.c kernels/cpu/*.c kernels/profile.c -lm
 *   build/core_block_step [batch] [iters]      (ViT-S block: 197 tokens, width 384, 6 heads)
 *   build/core_block_step kernels [batch] [iters]   (each non-GEMM CPU kernel alone, ViT-S shapes)
 * Prints the median forward / backward milliseconds, the GFLOP/s of the block's matrix
 * products and attention, images/s for one block, and the arena size after the step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>

#include "nn/arena.h"
#include "nn/base/base.h"
#include "nn/ops.h"
#include "nn/base/rng.h"
#include "kernels/backend.h"

#define T 197
#define C 384
#define H 6
#define HID 1536

static tensor *param(param_list *pl, const char *n, int nd, const int64_t *sh, float sc) {
    tensor *t = tensor_param(n, nd, sh);
    rng_t r = rng_make(1, rng_stream(RNG_INIT, (uint32_t)pl->n, 0));
    for (int64_t i = 0; i < tensor_numel(t); i++) t->data[i] = sc * rng_normal(&r);
    params_add(pl, t);
    return t;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- per-kernel timings: the non-GEMM kernels one ViT-S block calls per step, at its shapes ---- */

static float *randbuf(int64_t n, uint32_t seed) {
    float *p = xmalloc_aligned((size_t)n * sizeof(float));
    rng_t r = rng_make(seed, 0);
    for (int64_t i = 0; i < n; i++) p[i] = rng_normal(&r);
    return p;
}

/* CORE_CPUTIME=1: process CPU seconds instead of wall seconds (on a machine shared with other
 * jobs, CPU time is what the kernel itself consumed; meaningful with 1 thread) */
static double clock_now(void) {
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("CORE_CPUTIME") && atoi(getenv("CORE_CPUTIME")) > 0;
    if (!cpu) return now_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

#define TIME_KERNEL(NAME, CALLS, STMT)                                                            \
    do {                                                                                          \
        double best = 1e30;                                                                       \
        for (int it_ = 0; it_ <= iters; it_++) {                                                  \
            double t0_ = clock_now();                                                             \
            STMT;                                                                                 \
            double dt_ = clock_now() - t0_;                                                       \
            if (it_ && dt_ < best) best = dt_;                                                    \
        }                                                                                         \
        printf("  %-34s %8.2f ms  x%-2d per block step = %7.2f ms\n", NAME, best * 1e3, CALLS,   \
               best * 1e3 * (CALLS));                                                             \
        total += best * 1e3 * (CALLS);                                                            \
    } while (0)

static int kernels_main(int B, int iters) {
    const er_backend *be = backend_get(DEV_CPU);
    int64_t R = (int64_t)B * T, D = C / H;
    float *x = randbuf(R * HID, 1), *y = randbuf(R * HID, 2), *g = randbuf(R * HID, 3), *gx = randbuf(R * HID, 4);
    float *qkv = randbuf(R * 3 * C, 5), *o = randbuf(R * C, 6), *go = randbuf(R * C, 7);
    float *gqkv = randbuf(R * 3 * C, 8), *w = randbuf(HID, 9), *bb = randbuf(HID, 10), *stats = randbuf(2 * R, 11);
    float *lse = randbuf((int64_t)B * H * T, 12);
    float *work = xmalloc_aligned(be->attention_workspace(GEMM_COMPUTE_FP32, B, H, T, T, (int)D) * sizeof(float));
    float *lnwork = xmalloc_aligned((be->layernorm_backward_workspace(R, C) + 1) * sizeof(float));
    float *sumwork = xmalloc_aligned((be->sum_to_workspace(2, (int64_t[]){R, HID}, (int64_t[]){1, HID}) + 1) * sizeof(float));
    double total = 0;
    printf("{\"mode\": \"kernels\", \"batch\": %d, \"threads\": %d}\n", B, omp_get_max_threads());
    TIME_KERNEL("gelu forward [R,1536]", 1, be->unary(UN_GELU, R * HID, x, y, 0, 0));
    TIME_KERNEL("gelu backward [R,1536]", 1, be->unary_backward(UN_GELU, R * HID, x, y, g, gx, 0, 0, 1));
    TIME_KERNEL("layernorm forward [R,384]", 2, be->layernorm(R, C, ER_F32, x, w, bb, 1e-6f, ER_F32, y, stats, stats + R));
    TIME_KERNEL("layernorm backward [R,384]", 2, be->layernorm_backward(R, C, ER_F32, x, w, stats, stats + R, ER_F32, g, gx, w, bb, lnwork));
    /* bf16 storage (issue #27): the residual stream's layernorm writing bf16 and taking a bf16
     * gradient, bias+GELU reading and writing bf16 (the buffers above hold either type). Counted 0
     * times per step: alternatives to rows above, not in the total. */
    TIME_KERNEL("layernorm forward fp32->bf16 [R,384]", 0,
                be->layernorm(R, C, ER_F32, x, w, bb, 1e-6f, ER_BF16, y, stats, stats + R));
    TIME_KERNEL("layernorm backward bf16 gy [R,384]", 0,
                be->layernorm_backward(R, C, ER_F32, x, w, stats, stats + R, ER_BF16, g, gx, w, bb, lnwork));
    float *bgwork = xmalloc_aligned((be->bias_gelu_backward_workspace(R, HID) + 1) * sizeof(float));
    TIME_KERNEL("bias_gelu forward fp32 [R,1536]", 0, be->bias_gelu(R, HID, ER_F32, x, bb, y));
    TIME_KERNEL("bias_gelu forward bf16 [R,1536]", 0, be->bias_gelu(R, HID, ER_BF16, x, bb, y));
    TIME_KERNEL("bias_gelu backward fp32 [R,1536]", 0, be->bias_gelu_backward(R, HID, ER_F32, x, bb, g, gx, w, 0, bgwork));
    TIME_KERNEL("bias_gelu backward bf16 [R,1536]", 0, be->bias_gelu_backward(R, HID, ER_BF16, x, bb, g, gx, w, 0, bgwork));
    free(bgwork);
    int64_t qs[3] = {T * 3 * C, D, 3 * C}, os[3] = {T * C, D, C};
    TIME_KERNEL("attention forward (softmax+gemm)", 1,
                be->attention(GEMM_COMPUTE_FP32, B, H, T, T, (int)D, 0.125f, qkv, qs, qkv + C, qs, qkv + 2 * C, qs, MASK_NONE, NULL,
                              qs, o, os, lse, work));
    TIME_KERNEL("attention backward (recompute+gemm)", 1,
                be->attention_backward(GEMM_COMPUTE_FP32, B, H, T, T, (int)D, 0.125f, qkv, qs, qkv + C, qs, qkv + 2 * C, qs, MASK_NONE,
                                       NULL, qs, o, os, go, os, lse, gqkv, qs, gqkv + C, qs, gqkv + 2 * C, qs, work));
    int64_t sh2[2] = {R, C}, st2[2] = {C, 1}, bst[2] = {0, 1};
    TIME_KERNEL("binary add residual [R,384]", 2, be->binary(BIN_ADD, 2, sh2, x, st2, g, st2, y));
    TIME_KERNEL("binary add bias in place [R,1536]", 1,
                be->binary(BIN_ADD, 2, (int64_t[]){R, HID}, y, (int64_t[]){HID, 1}, bb, bst, y));
    TIME_KERNEL("binary_grad add (accumulate) [R,384]", 4, be->binary_grad(BIN_ADD, 0, 2, sh2, x, st2, g, st2, g, gx, 1));
    TIME_KERNEL("sum_to bias grad [R,1536]->[1536]", 1,
                be->sum_to(2, (int64_t[]){R, HID}, g, (int64_t[]){1, HID}, bb, 1, sumwork));
    TIME_KERNEL("sum_to bias grad [R,384]->[384] x3", 3, be->sum_to(2, sh2, g, (int64_t[]){1, C}, bb, 1, sumwork));
    /* permute backward of the qkv split: [3,B,H,T,D] gradient view added into packed [B,T,3,H,D] */
    int64_t psh[5] = {3, B, H, T, D}, pxs[5] = {C, T * 3 * C, D, 3 * C, 1}, pys[5] = {(int64_t)B * H * T * D, H * T * D, T * D, D, 1};
    TIME_KERNEL("copy_strided qkv permute (acc) [R,1152]", 1, be->copy_strided(5, psh, gx, pys, gqkv, pxs, 1));
    TIME_KERNEL("fill zero [R,1536]", 1, be->fill(gx, R * HID, 0.0f));
    TIME_KERNEL("fill zero [R,384]", 6, be->fill(gx, R * C, 0.0f));
    printf("  %-34s %8s     %-5s                = %7.2f ms\n", "total non-GEMM per block step", "", "", total);
    free(x); free(y); free(g); free(gx); free(qkv); free(o); free(go); free(gqkv); free(w); free(bb);
    free(stats); free(lse); free(work); free(lnwork); free(sumwork);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "kernels")) {
        int B = argc > 2 ? atoi(argv[2]) : 16, iters = argc > 3 ? atoi(argv[3]) : 5;
        if (B < 1 || iters < 1) return fprintf(stderr, "usage: core_block_step kernels [batch] [iters]\n"), 2;
        return kernels_main(B, iters);
    }
    int B = argc > 1 ? atoi(argv[1]) : 8, iters = argc > 2 ? atoi(argv[2]) : 5;
    if (B < 1 || iters < 1 || iters > 100) return fprintf(stderr, "usage: core_block_step [batch] [iters<=100]\n"), 2;
    param_list pl = {0};
    tensor *n1w = param(&pl, "norm1.weight", 1, SHAPE(C), 0.1f), *n1b = param(&pl, "norm1.bias", 1, SHAPE(C), 0.1f);
    tensor *qw = param(&pl, "attn.qkv.weight", 2, SHAPE(3 * C, C), 0.05f), *qb = param(&pl, "attn.qkv.bias", 1, SHAPE(3 * C), 0.1f);
    tensor *pw = param(&pl, "attn.proj.weight", 2, SHAPE(C, C), 0.05f), *pb = param(&pl, "attn.proj.bias", 1, SHAPE(C), 0.1f);
    tensor *n2w = param(&pl, "norm2.weight", 1, SHAPE(C), 0.1f), *n2b = param(&pl, "norm2.bias", 1, SHAPE(C), 0.1f);
    tensor *f1w = param(&pl, "mlp.fc1.weight", 2, SHAPE(HID, C), 0.05f), *f1b = param(&pl, "mlp.fc1.bias", 1, SHAPE(HID), 0.1f);
    tensor *f2w = param(&pl, "mlp.fc2.weight", 2, SHAPE(C, HID), 0.02f), *f2b = param(&pl, "mlp.fc2.bias", 1, SHAPE(C), 0.1f);
    tensor *x = tensor_new(3, SHAPE(B, T, C));
    rng_t r = rng_make(2, 0);
    for (int64_t i = 0; i < tensor_numel(x); i++) x->data[i] = rng_normal(&r);
    double fw[101], bw[101];
    for (int it = 0; it <= iters; it++) { /* iteration 0 warms the arena up */
        double t0 = clock_now();
        tensor *h = op_layernorm(x, n1w, n1b, 1e-6f);
        tensor *qkv = op_reshape(op_linear(h, qw, qb), 5, SHAPE(B, T, 3, H, C / H));
        tensor *p = op_permute(qkv, (int[]){2, 0, 3, 1, 4});
        tensor *q = op_squeeze(op_slice(p, 0, 0, 1), 0), *k = op_squeeze(op_slice(p, 0, 1, 2), 0),
               *v = op_squeeze(op_slice(p, 0, 2, 3), 0);
        tensor *a = op_reshape(op_transpose(op_attention(q, k, v, NULL, MASK_NONE, 0), 1, 2), 3, SHAPE(B, T, C));
        tensor *y = op_add(x, op_linear(a, pw, pb));
        h = op_gelu(op_linear(op_layernorm(y, n2w, n2b, 1e-6f), f1w, f1b));
        tensor *out = op_add(y, op_linear(h, f2w, f2b));
        tensor *loss = op_mean_all(op_mul(out, out));
        double t1 = clock_now();
        if (backward(loss)) return fprintf(stderr, "%s\n", er_msg()), 1;
        double t2 = clock_now();
        if (it) {
            fw[it - 1] = t1 - t0;
            bw[it - 1] = t2 - t1;
        }
        zero_grad(&pl);
        if (it < iters) nn_step_end();
    }
    size_t arena_mb = arena_capacity(arena_default(DEV_CPU)) >> 20;
    qsort(fw, iters, sizeof *fw, cmp);
    qsort(bw, iters, sizeof *bw, cmp);
    double f = fw[iters / 2], b = bw[iters / 2];
    double flops = 2.0 * B * T * ((double)C * 3 * C + (double)C * C + 2.0 * C * HID) + 4.0 * B * T * T * C;
    printf("{\"batch\": %d, \"tokens\": %d, \"width\": %d, \"heads\": %d, \"fwd_ms\": %.1f, \"bwd_ms\": %.1f, "
           "\"fwd_gflops\": %.1f, \"bwd_gflops\": %.1f, \"img_per_s_block\": %.1f, \"arena_mb\": %zu}\n",
           B, T, C, H, f * 1e3, b * 1e3, flops / f * 1e-9, 2 * flops / b * 1e-9, B / (f + b), arena_mb);
    nn_step_end();
    tensor_free(x);
    params_free(&pl);
    arena_default_free_all();
    return 0;
}
