/* test_pool_simd.c — max pooling with the AVX-512 interior windows (kernels/cpu/pool_avx512.c)
 * against the scalar rule written out here: values and argmax bit-identical, on inputs full of
 * ties (ReLU-like zeros, few distinct values), NaNs and -inf, for the stem geometry and odd ones
 * (column strides 1 and 2, where the vector path runs, and 3, where it does not), row tails of
 * every length, 1 and 2 threads. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

/* the rule: rows then columns of the window, a strictly greater value or a NaN takes over */
static void ref_maxpool(const pool2d_args *a, const float *x, float *y, int32_t *am) {
    for (int64_t pl = 0; pl < (int64_t)a->N * a->C; pl++)
        for (int p = 0; p < a->P; p++)
            for (int q = 0; q < a->Q; q++) {
                float m = -INFINITY;
                int32_t best = -1;
                for (int r = 0; r < a->R; r++)
                    for (int s = 0; s < a->S; s++) {
                        int h = p * a->sh - a->ph + r, w = q * a->sw - a->pw + s;
                        if (h < 0 || h >= a->H || w < 0 || w >= a->W) continue;
                        float v = x[pl * a->H * a->W + h * a->W + w];
                        if (best < 0 || v > m || isnan(v)) m = v, best = h * a->W + w;
                    }
                y[(pl * a->P + p) * a->Q + q] = m;
                am[(pl * a->P + p) * a->Q + q] = best;
            }
}

static void check(int N, int C, int H, int W, int k, int stride, int pad, int threads, uint32_t seed) {
    pool2d_args a = {.N = N, .C = C, .H = H, .W = W, .R = k, .S = k, .sh = stride, .sw = stride, .ph = pad, .pw = pad};
    pool2d_args_fill(&a);
    int64_t nx = (int64_t)N * C * H * W, ny = (int64_t)N * C * a.P * a.Q;
    float *x = xmalloc(sizeof(float) * nx), *y = xmalloc(sizeof(float) * ny), *y0 = xmalloc(sizeof(float) * ny);
    int32_t *am = xmalloc(sizeof(int32_t) * ny), *am0 = xmalloc(sizeof(int32_t) * ny);
    rng_t r = rng_make(seed, 0);
    for (int64_t i = 0; i < nx; i++) {
        float u = rng_uniform(&r);
        x[i] = u < 0.4f ? 0.0f : u < 0.42f ? NAN : u < 0.44f ? -INFINITY : (float)(int)(u * 8) - 3.0f;
    }
    ref_maxpool(&a, x, y0, am0);
    int nt = omp_get_max_threads();
    omp_set_num_threads(threads);
    cpu_maxpool2d(&a, x, y, am);
    omp_set_num_threads(nt);
    for (int64_t i = 0; i < ny; i++) {
        cr_assert(am[i] == am0[i], "N%d C%d %dx%d k%d s%d p%d: output %lld argmax %d vs %d", N, C, H, W, k, stride, pad,
                  (long long)i, am[i], am0[i]);
        cr_assert(memcmp(&y[i], &y0[i], sizeof(float)) == 0 || (isnan(y[i]) && isnan(y0[i])), "output %lld: %g vs %g",
                  (long long)i, y[i], y0[i]);
    }
    free(x), free(y), free(y0), free(am), free(am0);
}

Test(kernels_pool_simd, maxpool_matches_scalar_rule) {
    const int geo[][3] = {{3, 2, 1}, {3, 1, 1}, {2, 2, 0}, {5, 1, 2}, {1, 1, 0}, {3, 2, 0}, {2, 1, 1}, {3, 3, 1}};
    const int sizes[][2] = {{112, 112}, {13, 17}, {9, 7}, {5, 40}, {4, 33}, {7, 66}};
    for (size_t g = 0; g < sizeof geo / sizeof *geo; g++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            if (sizes[s][0] == 112 && g > 0) continue; /* the stem shape once */
            if (sizes[s][0] < geo[g][0] || sizes[s][1] < geo[g][0]) continue;
            for (int threads = 1; threads <= 2; threads++)
                check(2, 3, sizes[s][0], sizes[s][1], geo[g][0], geo[g][1], geo[g][2], threads, 10 + (uint32_t)(g * 7 + s));
        }
}
