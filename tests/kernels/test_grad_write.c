/* test_grad_write.c — the write-only input gradients of the ResNet backward kernels (issue #29:
 * no zero-fill of an activation gradient that is fully written). With accumulate 0, conv2d_backward,
 * batchnorm_backward and unary_backward write every element of gx without reading it (gx starts as
 * NaN) and give the values of the accumulating call on a zero-filled buffer (the old path: fill,
 * then +=), for the conv's direct and col2im paths and a strided 1x1 (input positions no window
 * covers), batch norm in training and eval mode, and every unary map (GELU's SIMD path too). */
#include <math.h>
#include <string.h>

#include "kernels/conv_args.h"
#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static float *rnd(int64_t n, float lo, float hi, uint32_t seed) {
    float *p = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    rng_t r = rng_make(seed, 0);
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * rng_uniform(&r);
    return p;
}

static float *filled(int64_t n, float v) {
    float *p = xmalloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = v;
    return p;
}

/* written (no NaN left) and equal in value to the zero-filled accumulation (+0 and -0 alike: a
 * product with beta 0 may keep a -0 that 0 + (-0) turns into +0) */
static void expect_written_as(const char *what, const float *got, const float *ref, int64_t n) {
    int64_t nan = 0, diff = 0;
    for (int64_t i = 0; i < n; i++) {
        nan += isnan(got[i]) && !isnan(ref[i]);
        diff += !(got[i] == ref[i] || (isnan(got[i]) && isnan(ref[i])));
    }
    cr_expect_eq(nan, 0, "%s: %lld of %lld elements not written", what, (long long)nan, (long long)n);
    cr_expect_eq(diff, 0, "%s: %lld of %lld elements differ from fill + accumulate", what, (long long)diff, (long long)n);
}

static void conv_case(conv2d_args a, const char *what) {
    conv2d_args_fill(&a);
    const int64_t nx = (int64_t)a.N * a.C * a.H * a.W, nw = (int64_t)a.K * (a.C / a.groups) * a.R * a.S;
    const int64_t ny = (int64_t)a.N * a.K * a.P * a.Q;
    float *x = rnd(nx, -1, 1, 1), *w = rnd(nw, -0.5f, 0.5f, 2), *gy = rnd(ny, -1, 1, 3);
    float *ref = filled(nx, 0.0f), *got = filled(nx, NAN);
    float *work = xmalloc(sizeof(float) * (cpu_conv2d_backward_workspace(&a) + 1));
    cpu_conv2d_backward(&a, x, w, gy, ref, NULL, NULL, work, 1);
    cpu_conv2d_backward(&a, x, w, gy, got, NULL, NULL, work, 0);
    expect_written_as(what, got, ref, nx);
    free(x), free(w), free(gy), free(ref), free(got), free(work);
}

Test(kernels_grad_write, conv2d_backward_writes_a_fresh_gx) {
    /* N C H W K R S P Q sh sw ph pw dh dw groups compute */
    conv_case((conv2d_args){2, 8, 9, 9, 16, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, GEMM_COMPUTE_FP32}, "1x1 (direct)");
    conv_case((conv2d_args){3, 6, 9, 7, 8, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1, GEMM_COMPUTE_FP32}, "3x3 (col2im)");
    conv_case((conv2d_args){2, 8, 9, 9, 16, 1, 1, 0, 0, 2, 2, 0, 0, 1, 1, 1, GEMM_COMPUTE_FP32}, "1x1 stride 2");
    conv_case((conv2d_args){2, 3, 15, 13, 8, 7, 7, 0, 0, 2, 2, 3, 3, 1, 1, 1, GEMM_COMPUTE_FP32}, "7x7 stride 2 stem");
    conv_case((conv2d_args){2, 8, 7, 7, 8, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 8, GEMM_COMPUTE_FP32}, "depthwise");
}

Test(kernels_grad_write, batchnorm_backward_writes_a_fresh_gx) {
    const int64_t N = 3, C = 5, HW = 37, n = N * C * HW;
    float *x = rnd(n, -2, 3, 4), *w = rnd(C, 0.5f, 1.5f, 5), *gy = rnd(n, -1, 1, 6);
    float *st = rnd(2 * C, 0.5f, 1.5f, 7); /* mean, rstd: any values serve a backward */
    for (int training = 0; training <= 1; training++) {
        float *ref = filled(n, 0.0f), *got = filled(n, NAN);
        float gw[2][5] = {{0}}, gb[2][5] = {{0}};
        cpu_batchnorm_backward(N, C, HW, x, w, st, st + C, gy, NULL, training, 1e-5f, ref, gw[0], gb[0], NULL, 1);
        cpu_batchnorm_backward(N, C, HW, x, w, st, st + C, gy, NULL, training, 1e-5f, got, gw[1], gb[1], NULL, 0);
        expect_written_as(training ? "batchnorm gx (training)" : "batchnorm gx (eval)", got, ref, n);
        cr_expect(!memcmp(gw[0], gw[1], sizeof gw[0]) && !memcmp(gb[0], gb[1], sizeof gb[0]),
                  "gw and gb accumulate whatever gx does");
        free(ref), free(got);
    }
    free(x), free(w), free(gy), free(st);
}

Test(kernels_grad_write, unary_backward_writes_a_fresh_gx) {
    const int64_t n = 5000; /* more than one SIMD chunk of GELU's path */
    for (int op = 0; op < UN_COUNT; op++) {
        int positive = op == UN_LOG || op == UN_SQRT || op == UN_POW;
        float *x = rnd(n, positive ? 0.1f : -3, 3, 10 + op), *gy = rnd(n, -1, 1, 30 + op), *y = filled(n, 0);
        float alpha = op == UN_POW ? 1.7f : (op == UN_CLAMP ? -0.5f : 0.8f), beta = op == UN_CLAMP ? 1.2f : 0.3f;
        cpu_unary(op, n, x, y, alpha, beta);
        float *ref = filled(n, 0.0f), *got = filled(n, NAN);
        cpu_unary_backward(op, n, x, y, gy, ref, alpha, beta, 1);
        cpu_unary_backward(op, n, x, y, gy, got, alpha, beta, 0);
        char what[32];
        snprintf(what, sizeof what, "unary op %d", op);
        expect_written_as(what, got, ref, n);
        free(x), free(gy), free(y), free(ref), free(got);
    }
}
