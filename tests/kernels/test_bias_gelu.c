/* cpu_bias_gelu / cpu_bias_gelu_backward (kernels/cpu/bias_gelu.c): against a double-precision
 * reference, bit for bit against the unfused kernels they replace (bias add + GELU; zero fill +
 * GELU backward + sum_to), the same bits on 1 and 2 threads; odd sizes, span and block tails. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static const int64_t SIZES[][2] = {{1, 1}, {3, 7}, {5, 17}, {63, 33}, {64, 16}, {65, 31}, {130, 1030}, {200, 1536}, {2, 2050}};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

static float *rnd(int64_t n, float lo, float hi, uint32_t tag) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(4321, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * rng_uniform(&r);
    return h;
}

static float *work_for(size_t n) { return xmalloc_aligned((n ? n : 1) * sizeof(float)); }

static double gelu_ref(double z) { return 0.5 * z * (1.0 + erf(z / sqrt(2.0))); }
static double gelu_d_ref(double z) { return 0.5 * (1.0 + erf(z / sqrt(2.0))) + z * exp(-0.5 * z * z) / sqrt(2.0 * M_PI); }

Test(kernels_bias_gelu, matches_a_double_reference) {
    for (int s = 0; s < NSIZES; s++) {
        int64_t R = SIZES[s][0], C = SIZES[s][1], n = R * C;
        float *x = rnd(n, -5, 5, 1 + s), *b = rnd(C, -1, 1, 30 + s), *gy = rnd(n, -1, 1, 60 + s);
        float *y = malloc(n * sizeof(float)), *gx = malloc(n * sizeof(float)), *gb = calloc(C, sizeof(float));
        float *work = work_for(cpu_bias_gelu_backward_workspace(R, C));
        cpu_bias_gelu(R, C, ER_F32, x, b, y);
        cpu_bias_gelu_backward(R, C, ER_F32, x, b, gy, gx, gb, 0, work);
        double *sum = calloc(C, sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            double z = (double)x[i] + b[i % C], t = gy[i] * gelu_d_ref(z);
            cr_assert(fabs(y[i] - gelu_ref(z)) <= 2e-6 * (1 + fabs(z)), "%lldx%lld y[%lld] %g vs %g", (long long)R,
                      (long long)C, (long long)i, y[i], gelu_ref(z));
            cr_assert(fabs(gx[i] - t) <= 2e-6 * (1 + fabs(t)), "gx[%lld] %g vs %g", (long long)i, gx[i], t);
            sum[i % C] += t;
        }
        for (int64_t c = 0; c < C; c++)
            cr_assert(fabs(gb[c] - sum[c]) <= 1e-5 * (1 + R), "gb[%lld] %g vs %g", (long long)c, gb[c], sum[c]);
        free(x); free(b); free(gy); free(y); free(gx); free(gb); free(work); free(sum);
    }
}

/* The unfused kernels on the same data: what the op layer did before (bias added in place, GELU;
 * a zero-filled gradient, GELU backward into it, the bias gradient by sum_to, accumulated). */
static void unfused(int64_t R, int64_t C, const float *x, const float *b, const float *gy, float *y, float *gx,
                    float *gb) {
    float *z = malloc(R * C * sizeof(float));
    int64_t sh[2] = {R, C}, st[2] = {C, 1}, bs[2] = {0, 1}, ones[2] = {1, C};
    cpu_binary(BIN_ADD, 2, sh, x, st, b, bs, z);
    cpu_unary(UN_GELU, R * C, z, y, 0, 0);
    cpu_fill(gx, R * C, 0.0f);
    cpu_unary_backward(UN_GELU, R * C, z, y, gy, gx, 0, 0, 1);
    float *work = work_for(cpu_sum_to_workspace(2, sh, ones));
    cpu_sum_to(2, sh, gx, ones, gb, 1, work);
    free(work);
    free(z);
}

Test(kernels_bias_gelu, bit_identical_to_the_unfused_kernels_on_1_and_2_threads) {
    int nt0 = omp_get_max_threads();
    for (int s = 0; s < NSIZES; s++) {
        int64_t R = SIZES[s][0], C = SIZES[s][1], n = R * C;
        float *x = rnd(n, -6, 6, 100 + s), *b = rnd(C, -2, 2, 130 + s), *gy = rnd(n, -3, 3, 160 + s);
        float *y0 = malloc(n * sizeof(float)), *gx0 = malloc(n * sizeof(float)), *gb0 = rnd(C, -1, 1, 190 + s);
        unfused(R, C, x, b, gy, y0, gx0, gb0);
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            float *y = malloc(n * sizeof(float)), *gx = rnd(n, -9, 9, 5), *gb = rnd(C, -1, 1, 190 + s);
            float *work = work_for(cpu_bias_gelu_backward_workspace(R, C));
            cpu_bias_gelu(R, C, ER_F32, x, b, y);
            cpu_bias_gelu_backward(R, C, ER_F32, x, b, gy, gx, gb, 0, work); /* gx's old contents must not matter */
            cr_expect(!memcmp(y, y0, n * sizeof(float)), "%lldx%lld, %d threads: forward differs", (long long)R, (long long)C, threads);
            cr_expect(!memcmp(gx, gx0, n * sizeof(float)), "%lldx%lld, %d threads: gx differs", (long long)R, (long long)C, threads);
            cr_expect(!memcmp(gb, gb0, C * sizeof(float)), "%lldx%lld, %d threads: gb differs", (long long)R, (long long)C, threads);
            free(y); free(gx); free(gb); free(work);
        }
        omp_set_num_threads(nt0);
        free(x); free(b); free(gy); free(y0); free(gx0); free(gb0);
    }
}

Test(kernels_bias_gelu, accumulate_adds_and_the_bias_sums_only_the_new_term) {
    int64_t R = 70, C = 19, n = R * C;
    float *x = rnd(n, -3, 3, 7), *b = rnd(C, -1, 1, 8), *gy = rnd(n, -1, 1, 9), *old = rnd(n, -1, 1, 10);
    float *gx = malloc(n * sizeof(float)), *fresh = malloc(n * sizeof(float));
    float *gb = calloc(C, sizeof(float)), *gb_fresh = calloc(C, sizeof(float)), *work = work_for(cpu_bias_gelu_backward_workspace(R, C));
    memcpy(gx, old, n * sizeof(float));
    cpu_bias_gelu_backward(R, C, ER_F32, x, b, gy, gx, gb, 1, work);
    cpu_bias_gelu_backward(R, C, ER_F32, x, b, gy, fresh, gb_fresh, 0, work);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(gx[i], old[i] + fresh[i], "gx[%lld]", (long long)i);
    cr_expect(!memcmp(gb, gb_fresh, C * sizeof(float)), "the bias sums see the GELU term, not gx's old value");
    cpu_bias_gelu_backward(R, C, ER_F32, x, b, gy, fresh, NULL, 0, work); /* no bias gradient wanted */
    free(x); free(b); free(gy); free(old); free(gx); free(fresh); free(gb); free(gb_fresh); free(work);
}
