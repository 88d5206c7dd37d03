/* cmd_bench_conv.c — `endoret bench conv`: the CPU conv2d kernel (im2col tiles + our sgemm) on the
 * convolution shapes of ResNet-50 at 224 px, against a direct seven-loop convolution (OpenMP over
 * images and output channels) timed in the same run on the same inputs. Also checks that the two
 * agree, so a fast wrong kernel cannot post a figure.
 *
 *   endoret bench conv [--batch 2] [--img 224] [--reps 3] [--threads 0] [--json]
 * --img scales every shape's input side by img / 224 (at least 1 px): the small feature maps of
 * PGCon's 24-120 px views, where im2col / col2im rather than the product set the time.
 * Per shape: forward ms and GFLOP/s of ours (best of --reps), of the direct loops (one run), their
 * ratio, and ours for the backward (data + filter gradients). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

typedef struct {
    const char *name;
    int C, H, K, R, stride, pad;
} conv_shape;

/* ResNet-50 (torchvision v1.5: stride on the 3x3) at 224 px: one of each distinct kind */
static const conv_shape SHAPES[] = {
    {"stem 7x7/2", 3, 224, 64, 7, 2, 3},     {"layer1 1x1 256->64", 256, 56, 64, 1, 1, 0},
    {"layer1 3x3", 64, 56, 64, 3, 1, 1},     {"layer1 1x1 64->256", 64, 56, 256, 1, 1, 0},
    {"layer2 3x3/2", 128, 56, 128, 3, 2, 1}, {"layer2 down 1x1/2", 256, 56, 512, 1, 2, 0},
    {"layer3 3x3", 256, 14, 256, 3, 1, 1},   {"layer4 3x3", 512, 7, 512, 3, 1, 1},
};

static void direct_conv(const conv2d_args *a, const float *x, const float *w, float *y) {
    #pragma omp parallel for collapse(2) schedule(dynamic)
    for (int n = 0; n < a->N; n++)
        for (int k = 0; k < a->K; k++)
            for (int p = 0; p < a->P; p++)
                for (int q = 0; q < a->Q; q++) {
                    float s = 0.0f;
                    for (int c = 0; c < a->C; c++)
                        for (int r = 0; r < a->R; r++) {
                            int ih = p * a->sh - a->ph + r;
                            if (ih < 0 || ih >= a->H) continue;
                            for (int t = 0; t < a->S; t++) {
                                int iw = q * a->sw - a->pw + t;
                                if (iw < 0 || iw >= a->W) continue;
                                s += x[(((int64_t)n * a->C + c) * a->H + ih) * a->W + iw] *
                                     w[(((int64_t)k * a->C + c) * a->R + r) * a->S + t];
                            }
                        }
                    y[(((int64_t)n * a->K + k) * a->P + p) * a->Q + q] = s;
                }
}

static float *rand_buf(int64_t n, uint32_t tag) {
    float *b = xmalloc_aligned((size_t)n * sizeof(float));
    rng_t r = rng_make(7, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) b[i] = rng_uniform(&r) - 0.5f;
    return b;
}

int cmd_bench_conv(int argc, char **argv) {
    int batch = 2, img = 224, reps = 3, threads = 0, json = 0;
    arg_spec specs[] = {
        {"batch", ARG_INT, &batch, "images per call", "[1, 256]"},
        {"img", ARG_INT, &img, "the network's input side: each shape's input side scaled by img / 224", "[16, 4096]"},
        {"reps", ARG_INT, &reps, "timed repetitions of our kernel (best kept)", "[1, inf)"},
        OPT_THREADS(&threads),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, (int)(sizeof specs / sizeof *specs), "endoret bench conv [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    if (threads) omp_set_num_threads(threads);
    const er_backend *be = backend_get(DEV_CPU);
    if (!json) printf("conv2d fp32 on the CPU, batch %d, input side %d, %d threads (ours: im2col + sgemm; direct: seven loops)\n",
                      batch, img, omp_get_max_threads());
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++) {
        const conv_shape *s = &SHAPES[i];
        int side = (int)((int64_t)s->H * img / 224);
        if (side < 1) side = 1;
        conv2d_args a = {.N = batch, .C = s->C, .H = side, .W = side, .K = s->K, .R = s->R, .S = s->R,
                         .sh = s->stride, .sw = s->stride, .ph = s->pad, .pw = s->pad, .dh = 1, .dw = 1, .groups = 1,
                         .compute = GEMM_COMPUTE_FP32};
        conv2d_args_fill(&a);
        int64_t nx = (int64_t)a.N * a.C * a.H * a.W, nw = (int64_t)a.K * a.C * a.R * a.S;
        int64_t ny = (int64_t)a.N * a.K * a.P * a.Q;
        size_t nwork = be->conv2d_workspace(&a), nbwork = be->conv2d_backward_workspace(&a);
        float *x = rand_buf(nx, 1), *w = rand_buf(nw, 2), *y = xmalloc_aligned(ny * 4), *yd = xmalloc_aligned(ny * 4);
        float *work = xmalloc_aligned((nwork > nbwork ? nwork : nbwork) * 4 + 64);
        float *gx = xmalloc_aligned(nx * 4), *gw = xmalloc_aligned(nw * 4);
        double flop = 2.0 * ny * a.C * a.R * a.S, best = INFINITY, best_b = INFINITY;
        for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
            double t = now_seconds();
            be->conv2d(&a, x, w, NULL, y, work);
            if (r) best = fmin(best, now_seconds() - t);
        }
        for (int r = 0; r <= reps; r++) {
            be->fill(gx, nx, 0.0f);
            be->fill(gw, nw, 0.0f);
            double t = now_seconds();
            be->conv2d_backward(&a, x, w, y, gx, gw, NULL, work, 1);
            if (r) best_b = fmin(best_b, now_seconds() - t);
        }
        double t = now_seconds();
        direct_conv(&a, x, w, yd);
        double direct = now_seconds() - t, err = 0, scale = 0;
        for (int64_t e = 0; e < ny; e++) {
            err = fmax(err, fabs((double)y[e] - yd[e]));
            scale = fmax(scale, fabs(yd[e]));
        }
        int agree = err <= 1e-4 * (scale + 1);
        if (json)
            printf("{\"bench\":\"conv2d\",\"shape\":\"%s\",\"img\":%d,\"batch\":%d,\"threads\":%d,\"ms\":%.3f,\"gflops\":%.2f,"
                   "\"direct_ms\":%.3f,\"direct_gflops\":%.2f,\"speedup\":%.2f,\"backward_ms\":%.3f,"
                   "\"backward_gflops\":%.2f,\"agree\":%s}\n", s->name, img, batch, omp_get_max_threads(), best * 1e3,
                   flop / best / 1e9, direct * 1e3, flop / direct / 1e9, direct / best, best_b * 1e3,
                   2 * flop / best_b / 1e9, agree ? "true" : "false");
        else
            printf("%-20s %3d->%-3d %3dx%-3d  ours %8.2f ms %6.1f GFLOP/s | direct %8.2f ms %5.1f GFLOP/s | "
                   "x%5.1f | backward %8.2f ms %6.1f GFLOP/s%s\n", s->name, a.C, a.K, a.P, a.Q, best * 1e3,
                   flop / best / 1e9, direct * 1e3, flop / direct / 1e9, direct / best, best_b * 1e3,
                   2 * flop / best_b / 1e9, agree ? "" : "  DISAGREE");
        free(x); free(w); free(y); free(yd); free(work); free(gx); free(gw);
        if (!agree) return er_fail(ER_RUNTIME, "bench conv: %s: ours and the direct loops differ by %g", s->name, err);
    }
    return ER_OK;
}
