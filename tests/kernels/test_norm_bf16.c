/* bf16 storage in the layernorm and bias+GELU kernels (kernels/cpu/norm.c, bias_gelu.c): a bf16
 * call must give exactly the fp32 call's result on the widened inputs, rounded once to nearest even
 * (kernels/dtype.h) — forward outputs, input gradients (written and accumulated) — and the same
 * fp32 statistics and weight/bias gradients, bit for bit, on 1 and 2 threads; odd sizes, block and
 * span tails, rows up to the bf16 limit. */
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static const int64_t SIZES[][2] = {{1, 1}, {3, 7}, {33, 17}, {65, 384}, {70, 1030}, {4, ER_LAYERNORM_BF16_MAX_COLS}};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

/* n values in [lo, hi) that bf16 holds exactly (so the fp32 reference sees what the bf16 call sees) */
static float *rnd_bf16(int64_t n, float lo, float hi, uint32_t tag, uint16_t **bits) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    *bits = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
    rng_t r = rng_make(777, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) {
        (*bits)[i] = er_f32_to_bf16(lo + (hi - lo) * rng_uniform(&r));
        h[i] = er_bf16_to_f32((*bits)[i]);
    }
    return h;
}

static float *rnd(int64_t n, float lo, float hi, uint32_t tag) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(778, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * rng_uniform(&r);
    return h;
}

/* Every element of the bf16 buffer equals the fp32 value rounded. */
static void expect_rounded(const uint16_t *got, const float *want, int64_t n, const char *what, int64_t R, int64_t C) {
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], er_f32_to_bf16(want[i]), "%s %lldx%lld [%lld]: bf16 0x%04x, fp32 path %.9g rounds to 0x%04x",
                     what, (long long)R, (long long)C, (long long)i, got[i], want[i], er_f32_to_bf16(want[i]));
}

static void expect_bits(const float *a, const float *b, int64_t n, const char *what) {
    cr_assert_eq(memcmp(a, b, (size_t)n * sizeof(float)), 0, "%s differs from the fp32 path", what);
}

/* xt, yt: the storage of x (and gx) and y (and gy); every combination against the fp32 path. */
static void layernorm_case(int64_t R, int64_t C, int xt, int yt, int s) {
    const int64_t n = R * C;
    uint16_t *xh, *gyh, *gx0h;
    float *x = rnd_bf16(n, -3, 3, 10 + s, &xh), *gy = rnd_bf16(n, -1, 1, 20 + s, &gyh);
    float *gx0 = rnd_bf16(n, -1, 1, 30 + s, &gx0h); /* the gradient's old value (accumulated into) */
    float *w = rnd(C, 0.5f, 1.5f, 40 + s), *b = rnd(C, -0.5f, 0.5f, 50 + s);
    /* the fp32 path */
    float *y = malloc(n * 4), *mean = malloc(R * 4), *rstd = malloc(R * 4), *gx = malloc(n * 4);
    float *gw = calloc(C, 4), *gb = calloc(C, 4);
    float *work = xmalloc_aligned(cpu_layernorm_backward_workspace(R, C) * 4);
    cpu_layernorm(R, C, ER_F32, x, w, b, 1e-6f, ER_F32, y, mean, rstd);
    memcpy(gx, gx0, n * 4);
    cpu_layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, gx, gw, gb, work);
    /* the mixed call */
    void *xin = xt == ER_BF16 ? (void *)xh : (void *)x, *gyin = yt == ER_BF16 ? (void *)gyh : (void *)gy;
    void *y2 = malloc(n * 4), *gx2 = malloc(n * 4);
    float *mean2 = malloc(R * 4), *rstd2 = malloc(R * 4), *gw2 = calloc(C, 4), *gb2 = calloc(C, 4);
    cpu_layernorm(R, C, xt, xin, w, b, 1e-6f, yt, y2, mean2, rstd2);
    if (xt == ER_BF16) memcpy(gx2, gx0h, n * 2);
    else memcpy(gx2, gx0, n * 4);
    cpu_layernorm_backward(R, C, xt, xin, w, mean2, rstd2, yt, gyin, gx2, gw2, gb2, work);
    char what[64];
    snprintf(what, sizeof what, "layernorm x %s y %s", er_dtype_name(xt), er_dtype_name(yt));
    expect_bits(mean, mean2, R, "mean");
    expect_bits(rstd, rstd2, R, "rstd");
    if (yt == ER_BF16) expect_rounded(y2, y, n, what, R, C);
    else expect_bits(y, y2, n, what);
    if (xt == ER_BF16) expect_rounded(gx2, gx, n, "layernorm gx (accumulated)", R, C);
    else expect_bits(gx, gx2, n, "layernorm gx");
    expect_bits(gw, gw2, C, "layernorm gw");
    expect_bits(gb, gb2, C, "layernorm gb");
    free(x), free(xh), free(gy), free(gyh), free(gx0), free(gx0h), free(w), free(b), free(y), free(mean), free(rstd);
    free(gx), free(gw), free(gb), free(work), free(y2), free(gx2), free(mean2), free(rstd2), free(gw2), free(gb2);
}

Test(kernels_norm_bf16, layernorm_is_the_fp32_path_rounded) {
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int s = 0; s < NSIZES; s++)
            for (int xt = 0; xt < 2; xt++)
                for (int yt = 0; yt < 2; yt++)
                    if (xt || yt) layernorm_case(SIZES[s][0], SIZES[s][1], xt, yt, s);
    }
    omp_set_num_threads(2);
}

static void bias_gelu_case(int64_t R, int64_t C, int accumulate, int s) {
    const int64_t n = R * C;
    uint16_t *xh, *gyh, *gx0h;
    float *x = rnd_bf16(n, -4, 4, 60 + s, &xh), *gy = rnd_bf16(n, -1, 1, 70 + s, &gyh);
    float *gx0 = rnd_bf16(n, -1, 1, 80 + s, &gx0h), *b = rnd(C, -1, 1, 90 + s);
    float *y = malloc(n * 4), *gx = malloc(n * 4), *gb = calloc(C, 4), *gb2 = calloc(C, 4);
    uint16_t *y2 = malloc(n * 2), *gx2 = malloc(n * 2);
    float *work = xmalloc_aligned(cpu_bias_gelu_backward_workspace(R, C) * 4 + 64);
    cpu_bias_gelu(R, C, ER_F32, x, b, y);
    memcpy(gx, gx0, n * 4);
    cpu_bias_gelu_backward(R, C, ER_F32, x, b, gy, gx, gb, accumulate, work);
    cpu_bias_gelu(R, C, ER_BF16, xh, b, y2);
    memcpy(gx2, gx0h, n * 2);
    cpu_bias_gelu_backward(R, C, ER_BF16, xh, b, gyh, gx2, gb2, accumulate, work);
    expect_rounded(y2, y, n, "bias_gelu y", R, C);
    expect_rounded(gx2, gx, n, accumulate ? "bias_gelu gx (accumulated)" : "bias_gelu gx", R, C);
    expect_bits(gb, gb2, C, "bias_gelu gb");
    free(x), free(xh), free(gy), free(gyh), free(gx0), free(gx0h), free(b), free(y), free(gx), free(gb), free(gb2);
    free(y2), free(gx2), free(work);
}

Test(kernels_norm_bf16, bias_gelu_is_the_fp32_path_rounded) {
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int s = 0; s < NSIZES; s++)
            for (int acc = 0; acc < 2; acc++) bias_gelu_case(SIZES[s][0], SIZES[s][1], acc, s);
    }
    omp_set_num_threads(2);
}
