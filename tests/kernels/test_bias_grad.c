/* cpu_bias_grad (kernels/cpu/bias_grad.c): bit for bit the cast + sum_to it replaced in the bf16
 * linear layer's backward (bf16 g widened, fp32 g as is), the rounded copy bit for bit cpu_cast,
 * against a double reference, the same bits on 1 and 2 threads; one block, several blocks, tails of
 * a block and of a span. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static const int64_t SIZES[][2] = {{1, 1}, {3, 7}, {64, 16}, {65, 31}, {130, 1030}, {200, 1536}, {2, 2050}};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

static float *rnd(int64_t n, uint32_t tag) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(977, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) h[i] = -2 + 4 * rng_uniform(&r);
    return h;
}

static float *work_for(size_t n) { return xmalloc_aligned((n ? n : 1) * sizeof(float)); }

/* gb0 + column sums the way the layer did before: widen (bf16), then sum_to accumulating */
static void reference(int64_t R, int64_t C, int dt, const void *g, float *gb) {
    const int64_t xs[2] = {R, C}, ys[2] = {1, C};
    float *gf = malloc((size_t)(R * C) * sizeof(float));
    cpu_cast(R * C, dt, g, ER_F32, gf, 0);
    float *work = work_for(cpu_sum_to_workspace(2, xs, ys));
    cpu_sum_to(2, xs, gf, ys, gb, 1, work);
    free(gf);
    free(work);
}

Test(kernels_bias_grad, bits_of_cast_and_sum_to_on_1_and_2_threads) {
    const int saved = omp_get_max_threads();
    for (int s = 0; s < NSIZES; s++) {
        const int64_t R = SIZES[s][0], C = SIZES[s][1], n = R * C;
        float *gf = rnd(n, 1 + s), *gb0 = rnd(C, 40 + s);
        uint16_t *gh = malloc((size_t)n * 2), *want16 = malloc((size_t)n * 2), *got16 = malloc((size_t)n * 2);
        cpu_cast(n, ER_F32, gf, ER_BF16, gh, 0);
        cpu_cast(n, ER_F32, gf, ER_BF16, want16, 0);
        for (int dt = 0; dt < 2; dt++) {
            const void *g = dt == ER_BF16 ? (const void *)gh : (const void *)gf;
            float *want = malloc(C * sizeof(float));
            memcpy(want, gb0, C * sizeof(float));
            reference(R, C, dt, g, want);
            double maxerr = 0;
            for (int64_t c = 0; c < C; c++) {
                double e = gb0[c];
                for (int64_t r = 0; r < R; r++)
                    e += dt == ER_BF16 ? er_bf16_to_f32(gh[r * C + c]) : gf[r * C + c];
                maxerr = fmax(maxerr, fabs(want[c] - e) / (1 + fabs(e)));
            }
            cr_assert(maxerr < 1e-5, "%lldx%lld: the reference itself is off (%g)", (long long)R, (long long)C, maxerr);
            for (int th = 1; th <= 2; th++) {
                omp_set_num_threads(th);
                float *gb = malloc(C * sizeof(float)), *work = work_for(cpu_bias_grad_workspace(R, C, dt));
                memcpy(gb, gb0, C * sizeof(float));
                memset(got16, 0xFF, (size_t)n * 2);
                cpu_bias_grad(R, C, dt, g, gb, dt == ER_F32 ? got16 : NULL, work);
                cr_assert(memcmp(gb, want, C * sizeof(float)) == 0, "%lldx%lld dt %d, %d threads: gb differs from cast + sum_to",
                          (long long)R, (long long)C, dt, th);
                if (dt == ER_F32)
                    cr_assert(memcmp(got16, want16, (size_t)n * 2) == 0, "%lldx%lld: g16 differs from cpu_cast", (long long)R,
                              (long long)C);
                memset(got16, 0xFF, (size_t)n * 2);
                cpu_bias_grad(R, C, dt, g, NULL, dt == ER_F32 ? got16 : NULL, work); /* the rounding alone */
                if (dt == ER_F32)
                    cr_assert(memcmp(got16, want16, (size_t)n * 2) == 0, "%lldx%lld: g16 without gb", (long long)R,
                              (long long)C);
                free(gb);
                free(work);
            }
            free(want);
        }
        free(gf); free(gb0); free(gh); free(want16); free(got16);
    }
    omp_set_num_threads(saved);
}
