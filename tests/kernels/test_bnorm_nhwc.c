/* The channels-last ResNet kernels (kernels/cpu/bnorm_nhwc.c, pool_nhwc.c) against the NCHW ones on
 * transposed data: batch norm (train / eval, ReLU) forward and backward within a few fp32 ulps (the
 * same double sums, possibly split differently by bnorm.c's `omp simd`), max pooling and its gather
 * backward bit for bit (ties, padding, a NaN), global average pooling; the z + ReLU fusion against
 * batch norm, add, ReLU; finite differences of the fused backward; bf16 storage = the fp32-storage
 * call on widened inputs, rounded once. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static float *rnd(int64_t n, float lo, float hi, uint32_t tag) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(4242, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) h[i] = lo + (hi - lo) * rng_uniform(&r);
    return h;
}
static float *dup(const float *x, int64_t n) {
    float *c = malloc((size_t)(n ? n : 1) * sizeof(float));
    memcpy(c, x, (size_t)n * sizeof(float));
    return c;
}
/* [N, A, B] -> [N, B, A]: [N, C, HW] -> [N, HW, C] and back */
static float *swap_last2(const float *x, int64_t N, int64_t A, int64_t B) {
    float *y = malloc((size_t)(N * A * B) * sizeof(float));
    for (int64_t n = 0; n < N; n++)
        for (int64_t a = 0; a < A; a++)
            for (int64_t b = 0; b < B; b++) y[(n * B + b) * A + a] = x[(n * A + a) * B + b];
    return y;
}
static float *to_nhwc(const float *x, int64_t N, int64_t C, int64_t HW) { return swap_last2(x, N, C, HW); }
static float *to_nchw(const float *x, int64_t N, int64_t C, int64_t HW) { return swap_last2(x, N, HW, C); }
/* |a - b| <= ulps * FLT_EPSILON * (|a| + the tensor's scale): a few fp32 ulps of the larger values */
static void expect_near(const char *what, const float *ref, const float *got, int64_t n, double ulps) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++)
        cr_assert(fabs((double)ref[i] - got[i]) <= ulps * FLT_EPSILON * (fabs(ref[i]) + scale), "%s[%lld]: %.9g vs %.9g",
                  what, (long long)i, ref[i], got[i]);
}
static void expect_same(const char *what, const float *ref, const float *got, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        cr_assert(memcmp(ref + i, got + i, 4) == 0 || (isnan(ref[i]) && isnan(got[i])), "%s[%lld]: %.9g vs %.9g", what,
                  (long long)i, ref[i], got[i]);
}
static void nan_fill(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
}

/* batchnorm_nhwc (z NULL) and its backward against batchnorm on the transposed data */
static void bn_vs_nchw(int64_t N, int64_t C, int64_t HW, int training, int relu) {
    const int64_t n = N * C * HW, M = N * HW;
    float *x = rnd(n, -2, 3, 1), *w = rnd(C, 0.5f, 1.5f, 2), *b = rnd(C, -1, 1, 3), *gy = rnd(n, -1, 1, 4);
    float *rm = rnd(C, -0.2f, 0.2f, 5), *rv = rnd(C, 0.5f, 1.5f, 6), *rm2 = dup(rm, C), *rv2 = dup(rv, C);
    float *y = malloc(n * 4), *yt = malloc(n * 4), *st = malloc(C * 8), *st2 = malloc(C * 8);
    float *xt = to_nhwc(x, N, C, HW), *gyt = to_nhwc(gy, N, C, HW);
    cpu_batchnorm(N, C, HW, x, w, b, rm, rv, training, 0.1f, 1e-5f, relu, y, st, st + C);
    cpu_batchnorm_nhwc(M, C, ER_F32, xt, w, b, rm2, rv2, training, 0.1f, 1e-5f, NULL, relu, yt, st2, st2 + C);
    float *yb = to_nchw(yt, N, C, HW);
    expect_near("y", y, yb, n, 4);
    expect_near("mean", st, st2, C, 2);
    expect_near("rstd", st + C, st2 + C, C, 2);
    expect_near("running_mean", rm, rm2, C, 2);
    expect_near("running_var", rv, rv2, C, 2);
    /* backward: gx, gw, gb accumulated onto random values, then gx written into NaN */
    float *gx = rnd(n, -1, 1, 7), *gw = rnd(C, -1, 1, 8), *gb = rnd(C, -1, 1, 9);
    float *gxt = to_nhwc(gx, N, C, HW), *gw2 = dup(gw, C), *gb2 = dup(gb, C);
    float *work = malloc((cpu_batchnorm_backward_workspace(N, C, HW, relu) + 1) * 4);
    cpu_batchnorm_backward(N, C, HW, x, w, st, st + C, gy, relu ? y : NULL, training, 1e-5f, gx, gw, gb, work, 1);
    cpu_batchnorm_nhwc_backward(M, C, ER_F32, xt, w, st, st + C, gyt, relu ? yt : NULL, training, 1e-5f, gxt, 1, gw2, gb2,
                                NULL, 0, NULL);
    float *gxb = to_nchw(gxt, N, C, HW);
    expect_near("gx (+=)", gx, gxb, n, 8);
    expect_near("gw", gw, gw2, C, 4);
    expect_near("gb", gb, gb2, C, 4);
    nan_fill(gx, n);
    nan_fill(gxt, n);
    cpu_batchnorm_backward(N, C, HW, x, w, st, st + C, gy, relu ? y : NULL, training, 1e-5f, gx, NULL, NULL, work, 0);
    float *gz = malloc(n * 4);
    nan_fill(gz, n);
    /* the same NHWC statistics as the NCHW call, so gx compares with its own arithmetic */
    cpu_batchnorm_nhwc_backward(M, C, ER_F32, xt, w, st, st + C, gyt, relu ? yt : NULL, training, 1e-5f, gxt, 0, NULL,
                                NULL, gz, 0, NULL);
    free(gxb);
    gxb = to_nchw(gxt, N, C, HW);
    expect_near("gx (written)", gx, gxb, n, 8);
    /* gz = the masked gy, bit for bit; then accumulated: gz + masked gy */
    for (int64_t i = 0; i < n; i++) {
        float g = relu ? (yt[i] > 0 ? gyt[i] : 0.0f) : gyt[i];
        cr_assert(gz[i] == g, "gz[%lld]: %g, want %g", (long long)i, gz[i], g);
    }
    float *gz0 = dup(gz, n);
    cpu_batchnorm_nhwc_backward(M, C, ER_F32, xt, w, st, st + C, gyt, relu ? yt : NULL, training, 1e-5f, NULL, 0, NULL,
                                NULL, gz, 1, NULL);
    for (int64_t i = 0; i < n; i++) cr_assert(gz[i] == gz0[i] + gz0[i], "gz (+=)[%lld]", (long long)i);
    free(x); free(w); free(b); free(gy); free(rm); free(rv); free(rm2); free(rv2); free(y); free(yt); free(st);
    free(st2); free(xt); free(gyt); free(yb); free(gx); free(gw); free(gb); free(gxt); free(gw2); free(gb2);
    free(work); free(gxb); free(gz); free(gz0);
}

Test(kernels_bnorm_nhwc, batchnorm_matches_nchw_on_transposed_data) {
    for (int training = 0; training <= 1; training++)
        for (int relu = 0; relu <= 1; relu++) {
            bn_vs_nchw(3, 20, 35, training, relu); /* a full channel block of 16 and a tail of 4 */
            bn_vs_nchw(2, 5, 7, training, relu);
        }
}

/* y = max(bn(x) + z, 0) is batch norm, then the add, then the ReLU: the same fp32 operations */
Test(kernels_bnorm_nhwc, residual_relu_fusion_is_bn_add_relu) {
    const int64_t M = 50, C = 19, n = M * C;
    float *x = rnd(n, -2, 3, 11), *z = rnd(n, -1.5f, 1.5f, 12), *w = rnd(C, 0.5f, 1.5f, 13), *b = rnd(C, -1, 1, 14);
    float *y = malloc(n * 4), *t = malloc(n * 4), *st = malloc(C * 8);
    cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, NULL, NULL, 1, 0.1f, 1e-5f, z, 1, y, st, st + C);
    cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, NULL, NULL, 1, 0.1f, 1e-5f, NULL, 0, t, st, st + C);
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = t[i] + z[i];
        v = v > 0.0f ? v : 0.0f;
        zeros += v == 0.0f;
        cr_assert(memcmp(&v, y + i, 4) == 0, "y[%lld]: fused %.9g, bn + z then relu %.9g", (long long)i, y[i], v);
    }
    cr_assert(zeros > n / 10 && zeros < n - n / 10, "the ReLU is exercised (%lld zeros of %lld)", (long long)zeros,
              (long long)n);
    free(x); free(z); free(w); free(b); free(y); free(t); free(st);
}

/* sum_i y_i * r_i for y = the fused op's output (double) */
static double fd_loss(int64_t M, int64_t C, const float *x, const float *w, const float *b, const float *rm,
                      const float *rv, int training, const float *z, const float *r) {
    float y[64], st[16];
    cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, (float *)rm, (float *)rv, training, 0.0f, 1e-5f, z, 1, y, st, st + C);
    double L = 0;
    for (int64_t i = 0; i < M * C; i++) L += (double)y[i] * r[i];
    return L;
}

/* Central differences (h 1e-2, fp32 forward summed in double) of gx, gz, gw, gb of the fused backward
 * on M 6, C 3; z is chosen so that every pre-activation is at least 0.3 from the ReLU's kink. */
Test(kernels_bnorm_nhwc, fused_backward_matches_finite_differences) {
    enum { M = 6, C = 3, n = M * C };
    for (int training = 0; training <= 1; training++) {
        float *x = rnd(n, -2, 2, 20), *w = rnd(C, 0.5f, 1.5f, 21), *b = rnd(C, -0.5f, 0.5f, 22), *r = rnd(n, -1, 1, 23);
        float *s = rnd(n, 0.3f, 1.5f, 24), rm[C] = {0.1f, -0.2f, 0.3f}, rv[C] = {0.8f, 1.3f, 0.6f};
        float bn[n], z[n], y[n], st[2 * C], gx[n], gz[n], gw[C] = {0}, gb[C] = {0};
        cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, rm, rv, training, 0.0f, 1e-5f, NULL, 0, bn, st, st + C);
        for (int i = 0; i < n; i++) z[i] = (i % 4 == 1 ? -s[i] : s[i]) - bn[i]; /* pre-activation +-s */
        cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, rm, rv, training, 0.0f, 1e-5f, z, 1, y, st, st + C);
        cpu_batchnorm_nhwc_backward(M, C, ER_F32, x, w, st, st + C, r, y, training, 1e-5f, gx, 0, gw, gb, gz, 0, NULL);
        const float h = 1e-2f;
        const double tol_abs = 2e-3, tol_rel = 1e-2;
        struct { const char *name; float *v; const float *g; int len; } p[] = {
            {"x", x, gx, n}, {"z", z, gz, n}, {"w", w, gw, C}, {"b", b, gb, C}};
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < p[k].len; i++) {
                const float v0 = p[k].v[i];
                p[k].v[i] = v0 + h;
                const double lp = fd_loss(M, C, x, w, b, rm, rv, training, z, r);
                p[k].v[i] = v0 - h;
                const double lm = fd_loss(M, C, x, w, b, rm, rv, training, z, r);
                p[k].v[i] = v0;
                const double num = (lp - lm) / (2.0 * h), ana = p[k].g[i];
                cr_assert(fabs(num - ana) <= tol_abs + tol_rel * fabs(num), "%s d%s[%d]: analytic %.7g, numeric %.7g",
                          training ? "training" : "eval", p[k].name, i, ana, num);
            }
        free(x); free(w); free(b); free(r); free(s);
    }
}

/* maxpool2d_nhwc: y and argmax are maxpool2d's on the transposed data; the gather backward is the
 * scatter into zeros (written) and old + that (accumulated), bit for bit */
Test(kernels_bnorm_nhwc, maxpool_matches_nchw) {
    const pool2d_args geo[] = {{2, 5, 9, 7, 3, 3, 0, 0, 2, 2, 1, 1}, {1, 3, 8, 8, 2, 2, 0, 0, 2, 2, 0, 0},
                               {2, 4, 6, 5, 3, 3, 0, 0, 1, 1, 1, 1}};
    for (int g = 0; g < 3; g++) {
        pool2d_args a = geo[g];
        pool2d_args_fill(&a);
        const int64_t N = a.N, C = a.C, HW = (int64_t)a.H * a.W, PQ = (int64_t)a.P * a.Q, nx = N * C * HW, ny = N * C * PQ;
        float *x = rnd(nx, -2, 2, 30 + g), *gy = rnd(ny, -1, 1, 33 + g), *g0 = rnd(nx, -1, 1, 36 + g);
        for (int64_t i = 0; i < nx; i += 3) x[i] = roundf(x[i]); /* ties */
        x[(0 * C + 1) * HW + a.W + 1] = NAN;                        /* channel 1 of image 0 */
        float *y = malloc(ny * 4), *yt = malloc(ny * 4), *gx = calloc(nx, 4), *gxt = malloc(nx * 4);
        int32_t *am = malloc(ny * 4), *amt = malloc(ny * 4);
        float *xt = to_nhwc(x, N, C, HW), *gyt = to_nhwc(gy, N, C, PQ);
        cpu_maxpool2d(&a, x, y, am);
        cpu_maxpool2d_nhwc(&a, ER_F32, xt, yt, amt);
        float *yb = to_nchw(yt, N, C, PQ);
        expect_same("maxpool y", y, yb, ny);
        int nans = 0;
        for (int64_t nn = 0; nn < N; nn++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < PQ; i++) {
                    cr_assert_eq(am[(nn * C + c) * PQ + i], amt[(nn * PQ + i) * C + c], "argmax %lld %lld %lld", (long long)nn,
                                 (long long)c, (long long)i);
                    nans += isnan(y[(nn * C + c) * PQ + i]);
                }
        cr_assert(nans > 0, "the NaN reaches an output");
        cpu_maxpool2d_backward(&a, gy, am, gx);
        nan_fill(gxt, nx);
        cpu_maxpool2d_nhwc_backward(&a, ER_F32, gyt, amt, gxt, 0);
        float *gxb = to_nchw(gxt, N, C, HW);
        expect_same("maxpool gx (written)", gx, gxb, nx);
        float *g0t = to_nhwc(g0, N, C, HW);
        cpu_maxpool2d_nhwc_backward(&a, ER_F32, gyt, amt, g0t, 1);
        free(gxb);
        gxb = to_nchw(g0t, N, C, HW);
        for (int64_t i = 0; i < nx; i++) gx[i] = g0[i] + gx[i];
        expect_same("maxpool gx (+=)", gx, gxb, nx);
        free(x); free(gy); free(g0); free(y); free(yt); free(gx); free(gxt); free(am); free(amt); free(xt); free(gyt);
        free(yb); free(gxb); free(g0t);
    }
}

Test(kernels_bnorm_nhwc, avgpool_matches_adaptive_avgpool) {
    const int64_t N = 3, C = 7, H = 7, W = 5, HW = H * W, nx = N * C * HW;
    float *x = rnd(nx, -2, 2, 40), *gy = rnd(N * C, -1, 1, 41), *g0 = rnd(nx, -1, 1, 42);
    float *y = malloc(N * C * 4), *y2 = malloc(N * C * 4), *gx = calloc(nx, 4), *gxt = malloc(nx * 4);
    float *xt = to_nhwc(x, N, C, HW);
    cpu_adaptive_avgpool2d(N * C, H, W, 1, 1, x, y);
    cpu_avgpool_nhwc(N, HW, C, ER_F32, xt, y2);
    expect_near("avgpool y", y, y2, N * C, 2);
    cpu_adaptive_avgpool2d_backward(N * C, H, W, 1, 1, gy, gx);
    nan_fill(gxt, nx);
    cpu_avgpool_nhwc_backward(N, HW, C, ER_F32, gy, gxt, 0);
    float *gxb = to_nchw(gxt, N, C, HW);
    expect_same("avgpool gx (written)", gx, gxb, nx);
    float *g0t = to_nhwc(g0, N, C, HW);
    cpu_avgpool_nhwc_backward(N, HW, C, ER_F32, gy, g0t, 1);
    free(gxb);
    gxb = to_nchw(g0t, N, C, HW);
    for (int64_t i = 0; i < nx; i++) gx[i] = g0[i] + gx[i];
    expect_same("avgpool gx (+=)", gx, gxb, nx);
    free(x); free(gy); free(g0); free(y); free(y2); free(gx); free(gxt); free(xt); free(gxb); free(g0t);
}

/* ---- bf16 storage: the fp32-storage call on the widened values, each dt output rounded once ---- */
static uint16_t *bf(const float *x, int64_t n) {
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = er_f32_to_bf16(x[i]);
    return h;
}
static float *widen(const uint16_t *h, int64_t n) {
    float *x = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) x[i] = er_bf16_to_f32(h[i]);
    return x;
}
static void expect_rounded(const char *what, const uint16_t *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], er_f32_to_bf16(want[i]), "%s[%lld]: 0x%04x, fp32 path %.9g", what, (long long)i, got[i], want[i]);
}
static void expect_bits(const char *what, const float *a, const float *b, int64_t n) {
    cr_assert_eq(memcmp(a, b, (size_t)n * 4), 0, "%s differs from the fp32-storage call", what);
}

Test(kernels_bnorm_nhwc, bf16_storage_is_the_fp32_call_rounded_once) {
    const int64_t M = 70, C = 21, n = M * C;
    float *x0 = rnd(n, -2, 3, 50), *z0 = rnd(n, -1, 1, 51), *gy0 = rnd(n, -1, 1, 52), *gx00 = rnd(n, -1, 1, 53);
    float *w = rnd(C, 0.5f, 1.5f, 54), *b = rnd(C, -1, 1, 55);
    uint16_t *xh = bf(x0, n), *zh = bf(z0, n), *gyh = bf(gy0, n), *gx0h = bf(gx00, n);
    float *x = widen(xh, n), *z = widen(zh, n), *gy = widen(gyh, n), *gx0 = widen(gx0h, n);
    for (int training = 0; training <= 1; training++) {
        float rm[2][32], rv[2][32], st[2][64], gw[2][32] = {{0}}, gb[2][32] = {{0}};
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < C; c++) rm[k][c] = 0.1f * c, rv[k][c] = 1.0f + 0.05f * c;
        float *y = malloc(n * 4), *gx = dup(gx0, n), *gz = dup(gx0, n);
        uint16_t *yh = malloc(n * 2), *gxh = malloc(n * 2), *gzh = malloc(n * 2);
        cpu_batchnorm_nhwc(M, C, ER_BF16, xh, w, b, rm[1], rv[1], training, 0.1f, 1e-5f, zh, 1, yh, st[1], st[1] + C);
        cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, rm[0], rv[0], training, 0.1f, 1e-5f, z, 1, y, st[0], st[0] + C);
        expect_rounded("bn y", yh, y, n);
        expect_bits("mean, rstd", st[0], st[1], 2 * C);
        expect_bits("running_mean", rm[0], rm[1], C);
        expect_bits("running_var", rv[0], rv[1], C);
        float *yw = widen(yh, n); /* both backward calls see the stored (bf16) output's mask */
        for (int acc = 0; acc <= 1; acc++) {
            memcpy(gx, gx0, n * 4);
            memcpy(gz, gx0, n * 4);
            memcpy(gxh, gx0h, n * 2);
            memcpy(gzh, gx0h, n * 2);
            cpu_batchnorm_nhwc_backward(M, C, ER_F32, x, w, st[0], st[0] + C, gy, yw, training, 1e-5f, gx, acc, gw[0], gb[0],
                                        gz, acc, NULL);
            cpu_batchnorm_nhwc_backward(M, C, ER_BF16, xh, w, st[1], st[1] + C, gyh, yh, training, 1e-5f, gxh, acc, gw[1],
                                        gb[1], gzh, acc, NULL);
            expect_rounded(acc ? "bn gx (+=)" : "bn gx", gxh, gx, n);
            expect_rounded(acc ? "bn gz (+=)" : "bn gz", gzh, gz, n);
            expect_bits("gw", gw[0], gw[1], C);
            expect_bits("gb", gb[0], gb[1], C);
        }
        free(y); free(gx); free(gz); free(yh); free(gxh); free(gzh); free(yw);
    }
    /* pooling on [2, 7, 5, 6] */
    pool2d_args a = {2, 6, 7, 5, 3, 3, 0, 0, 2, 2, 1, 1};
    pool2d_args_fill(&a);
    const int64_t nx = 2 * 7 * 5 * 6, ny = (int64_t)2 * a.P * a.Q * 6;
    float *py = malloc(ny * 4), *pgx = dup(gx0, nx), *ay = malloc(12 * 4), *ay2 = malloc(12 * 4);
    uint16_t *pyh = malloc(ny * 2), *pgxh = malloc(nx * 2);
    int32_t *am = malloc(ny * 4), *am2 = malloc(ny * 4);
    cpu_maxpool2d_nhwc(&a, ER_F32, x, py, am);
    cpu_maxpool2d_nhwc(&a, ER_BF16, xh, pyh, am2);
    expect_rounded("maxpool y", pyh, py, ny);
    cr_assert_eq(memcmp(am, am2, ny * 4), 0, "maxpool argmax");
    for (int acc = 0; acc <= 1; acc++) {
        memcpy(pgx, gx0, nx * 4);
        memcpy(pgxh, gx0h, nx * 2);
        cpu_maxpool2d_nhwc_backward(&a, ER_F32, gy, am, pgx, acc);
        cpu_maxpool2d_nhwc_backward(&a, ER_BF16, gyh, am, pgxh, acc);
        expect_rounded("maxpool gx", pgxh, pgx, nx);
        cpu_avgpool_nhwc(2, 35, 6, ER_F32, x, ay);
        cpu_avgpool_nhwc(2, 35, 6, ER_BF16, xh, ay2);
        expect_bits("avgpool y", ay, ay2, 12);
        memcpy(pgx, gx0, nx * 4);
        memcpy(pgxh, gx0h, nx * 2);
        cpu_avgpool_nhwc_backward(2, 35, 6, ER_F32, gy, pgx, acc);
        cpu_avgpool_nhwc_backward(2, 35, 6, ER_BF16, gy, pgxh, acc);
        expect_rounded("avgpool gx", pgxh, pgx, nx);
    }
    free(py); free(pgx); free(ay); free(ay2); free(pyh); free(pgxh); free(am); free(am2);
    free(x0); free(z0); free(gy0); free(gx00); free(w); free(b); free(xh); free(zh); free(gyh); free(gx0h);
    free(x); free(z); free(gy); free(gx0);
}

/* Above CPU_PAR_MIN the channel blocks run on several threads: the same bits on 1 and 2 threads. */
Test(kernels_bnorm_nhwc, threads_do_not_change_the_bits) {
    const int64_t M = 392, C = 100, n = M * C;
    float *x = rnd(n, -2, 3, 60), *z = rnd(n, -1, 1, 61), *gy = rnd(n, -1, 1, 62), *w = rnd(C, 0.5f, 1.5f, 63);
    float *b = rnd(C, -1, 1, 64), *y[2], *gx[2], *gz[2], st[2][200], gw[2][100] = {{0}};
    const int nt = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        y[t] = malloc(n * 4), gx[t] = malloc(n * 4), gz[t] = malloc(n * 4);
        cpu_batchnorm_nhwc(M, C, ER_F32, x, w, b, NULL, NULL, 1, 0.1f, 1e-5f, z, 1, y[t], st[t], st[t] + C);
        cpu_batchnorm_nhwc_backward(M, C, ER_F32, x, w, st[t], st[t] + C, gy, y[t], 1, 1e-5f, gx[t], 0, gw[t], NULL, gz[t],
                                    0, NULL);
    }
    omp_set_num_threads(nt);
    expect_bits("y", y[0], y[1], n);
    expect_bits("mean, rstd", st[0], st[1], 2 * C);
    expect_bits("gx", gx[0], gx[1], n);
    expect_bits("gz", gz[0], gz[1], n);
    expect_bits("gw", gw[0], gw[1], C);
    for (int t = 0; t < 2; t++) free(y[t]), free(gx[t]), free(gz[t]);
    free(x); free(z); free(gy); free(w); free(b);
}
