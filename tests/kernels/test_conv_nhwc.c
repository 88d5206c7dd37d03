/* The channels-last convolution's CPU reference (kernels/cpu/conv_nhwc.c) against the NCHW kernels
 * of conv.c, bit for bit: with fp32 storage y, a written gx and a gw accumulated from zero are the
 * NCHW op's results transposed; an accumulated gx is old + the written gradient, a gw accumulated
 * into old values is old + the gradient (one fp32 add each). With bf16 storage every output is the
 * fp32-storage call on the widened inputs rounded once to nearest even (gw: old + round(dw)).
 * Geometries: 1x1 stride 1, 3x3 stride 2 pad 1, the 7x7 stride 2 pad 3 stem with C 3, groups 2. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

/* n values in [lo, hi): fp32 ones, or (bf16_exact) ones that bf16 holds exactly */
static float *rnd(int64_t n, float lo, float hi, uint32_t tag, int bf16_exact) {
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    rng_t r = rng_make(4242, rng_stream(RNG_SAMPLING, tag, 0));
    for (int64_t i = 0; i < n; i++) {
        h[i] = lo + (hi - lo) * rng_uniform(&r);
        if (bf16_exact) h[i] = er_bf16_to_f32(er_f32_to_bf16(h[i]));
    }
    return h;
}

/* [N, C, HW] <-> [N, HW, C] */
static float *to_nhwc(const float *x, int64_t N, int64_t C, int64_t HW) {
    const int64_t n = N * C * HW;
    float *y = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < HW; i++) y[(n * HW + i) * C + c] = x[(n * C + c) * HW + i];
    return y;
}

static uint16_t *bf16_of(const float *x, int64_t n) {
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = er_f32_to_bf16(x[i]);
    return h;
}

static float *work_for(size_t floats) { return xmalloc_aligned((floats ? floats : 1) * sizeof(float)); }

static void expect_bits(const float *want, const float *got, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        cr_assert(memcmp(&want[i], &got[i], 4) == 0, "%s [%lld]: %.9g, want %.9g", what, (long long)i, got[i], want[i]);
}
static void expect_rounded(const float *want, const uint16_t *got, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], er_f32_to_bf16(want[i]), "%s [%lld]: bf16 0x%04x, fp32 path %.9g rounds to 0x%04x", what,
                     (long long)i, got[i], want[i], er_f32_to_bf16(want[i]));
}

typedef struct {
    conv2d_args a;
    int64_t nx, ny, nw, HW, PQ;
    float *x, *w, *gy, *gx0, *gw0; /* NCHW; w and gw0 fp32, the others bf16-exact */
} conv_case;

static conv_case make_case(conv2d_args a, uint32_t tag) {
    conv2d_args_fill(&a);
    conv_case t = {.a = a};
    t.HW = (int64_t)a.H * a.W, t.PQ = (int64_t)a.P * a.Q;
    t.nx = a.N * a.C * t.HW, t.ny = a.N * a.K * t.PQ, t.nw = (int64_t)a.K * (a.C / a.groups) * a.R * a.S;
    t.x = rnd(t.nx, -1, 1, tag, 1), t.w = rnd(t.nw, -0.5f, 0.5f, tag + 1, 0), t.gy = rnd(t.ny, -1, 1, tag + 2, 1);
    t.gx0 = rnd(t.nx, -1, 1, tag + 3, 1), t.gw0 = rnd(t.nw, -1, 1, tag + 4, 0);
    return t;
}
static void free_case(conv_case *t) { free(t->x), free(t->w), free(t->gy), free(t->gx0), free(t->gw0); }

/* fp32 storage: the NHWC op is the NCHW op on transposed data */
static void fp32_matches_nchw(conv2d_args geo, uint32_t tag) {
    conv_case t = make_case(geo, tag);
    const conv2d_args *a = &t.a;
    float *xh = to_nhwc(t.x, a->N, a->C, t.HW), *gyh = to_nhwc(t.gy, a->N, a->K, t.PQ);
    /* NCHW reference: y, gx written, gw from zero */
    float *y = malloc(t.ny * 4), *gx = malloc(t.nx * 4), *gw = calloc(t.nw, 4);
    float *wk = work_for(cpu_conv2d_workspace(a)), *wkb = work_for(cpu_conv2d_backward_workspace(a));
    cpu_conv2d(a, t.x, t.w, NULL, y, wk);
    cpu_conv2d_backward(a, t.x, t.w, t.gy, gx, gw, NULL, wkb, 0);
    float *yh_want = to_nhwc(y, a->N, a->K, t.PQ), *gxh_want = to_nhwc(gx, a->N, a->C, t.HW);
    /* NHWC */
    float *yh = malloc(t.ny * 4), *gxh = malloc(t.nx * 4), *gwh = calloc(t.nw, 4);
    float *nk = work_for(cpu_conv2d_nhwc_workspace(a, ER_F32)), *nkb = work_for(cpu_conv2d_nhwc_backward_workspace(a, ER_F32));
    cpu_conv2d_nhwc(a, ER_F32, xh, t.w, yh, nk);
    expect_bits(yh_want, yh, t.ny, "fp32 y");
    for (int64_t i = 0; i < t.nx; i++) gxh[i] = NAN; /* written, not read */
    cpu_conv2d_nhwc_backward(a, ER_F32, xh, t.w, gyh, gxh, gwh, nkb, 0);
    expect_bits(gxh_want, gxh, t.nx, "fp32 gx (gx_acc 0)");
    expect_bits(gw, gwh, t.nw, "fp32 gw (from zero)");
    /* accumulated: gx = old + written gradient, gw = old + gradient (gx alone, then gw alone) */
    float *gx0h = to_nhwc(t.gx0, a->N, a->C, t.HW);
    memcpy(gxh, gx0h, t.nx * 4);
    cpu_conv2d_nhwc_backward(a, ER_F32, xh, t.w, gyh, gxh, NULL, nkb, 1);
    for (int64_t i = 0; i < t.nx; i++) gxh_want[i] += gx0h[i];
    expect_bits(gxh_want, gxh, t.nx, "fp32 gx (gx_acc 1)");
    memcpy(gwh, t.gw0, t.nw * 4);
    cpu_conv2d_nhwc_backward(a, ER_F32, xh, t.w, gyh, NULL, gwh, nkb, 1);
    for (int64_t i = 0; i < t.nw; i++) gw[i] += t.gw0[i];
    expect_bits(gw, gwh, t.nw, "fp32 gw (accumulated)");
    free(xh), free(gyh), free(y), free(gx), free(gw), free(wk), free(wkb), free(yh_want), free(gxh_want);
    free(yh), free(gxh), free(gwh), free(nk), free(nkb), free(gx0h);
    free_case(&t);
}

/* bf16 storage: the fp32-storage call (compute bf16: the same bf16-rounded weights) on the widened
 * inputs, rounded once */
static void bf16_is_fp32_rounded(conv2d_args geo, uint32_t tag) {
    geo.compute = GEMM_COMPUTE_BF16;
    conv_case t = make_case(geo, tag);
    const conv2d_args *a = &t.a;
    float *xh = to_nhwc(t.x, a->N, a->C, t.HW), *gyh = to_nhwc(t.gy, a->N, a->K, t.PQ);
    float *gx0h = to_nhwc(t.gx0, a->N, a->C, t.HW);
    uint16_t *x16 = bf16_of(xh, t.nx), *gy16 = bf16_of(gyh, t.ny), *gx016 = bf16_of(gx0h, t.nx);
    float *y = malloc(t.ny * 4), *gx = malloc(t.nx * 4), *dw = calloc(t.nw, 4);
    uint16_t *y16 = malloc(t.ny * 2), *gx16 = malloc(t.nx * 2);
    float *gw = malloc(t.nw * 4);
    size_t nws = cpu_conv2d_nhwc_backward_workspace(a, ER_F32), nws16 = cpu_conv2d_nhwc_backward_workspace(a, ER_BF16);
    float *wk = work_for(nws > nws16 ? nws : nws16);
    /* the fp32 path (y, gx written, dw from zero), then the bf16 calls */
    cpu_conv2d_nhwc(a, ER_F32, xh, t.w, y, wk);
    cpu_conv2d_nhwc_backward(a, ER_F32, xh, t.w, gyh, gx, dw, wk, 0);
    cpu_conv2d_nhwc(a, ER_BF16, x16, t.w, y16, wk);
    expect_rounded(y, y16, t.ny, "bf16 y");
    /* bf16 storage computes in bf16 whatever a->compute says (the device rounds its weights too) */
    conv2d_args f = *a;
    f.compute = GEMM_COMPUTE_FP32;
    cpu_conv2d_nhwc(&f, ER_BF16, x16, t.w, y16, wk);
    expect_rounded(y, y16, t.ny, "bf16 y (compute fp32 asked)");
    memcpy(gw, t.gw0, t.nw * 4);
    cpu_conv2d_nhwc_backward(a, ER_BF16, x16, t.w, gy16, gx16, gw, wk, 0);
    expect_rounded(gx, gx16, t.nx, "bf16 gx (gx_acc 0)");
    for (int64_t i = 0; i < t.nw; i++) {
        float want = t.gw0[i] + er_bf16_to_f32(er_f32_to_bf16(dw[i]));
        cr_assert(memcmp(&want, &gw[i], 4) == 0, "bf16 gw [%lld]: %.9g, want old + round(dw) %.9g", (long long)i, gw[i], want);
    }
    memcpy(gx16, gx016, t.nx * 2);
    cpu_conv2d_nhwc_backward(a, ER_BF16, x16, t.w, gy16, gx16, NULL, wk, 1);
    for (int64_t i = 0; i < t.nx; i++) gx[i] += gx0h[i];
    expect_rounded(gx, gx16, t.nx, "bf16 gx (gx_acc 1)");
    free(xh), free(gyh), free(gx0h), free(x16), free(gy16), free(gx016), free(y), free(gx), free(dw), free(y16);
    free(gx16), free(gw), free(wk);
    free_case(&t);
}

/* N C H W K R S P Q sh sw ph pw dh dw groups compute */
static const conv2d_args GEO[] = {
    {2, 16, 16, 16, 32, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, GEMM_COMPUTE_FP32}, /* 1x1 stride 1 (x itself the matrix) */
    {2, 16, 9, 9, 32, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, GEMM_COMPUTE_FP32},   /* 1x1, images grouped */
    {2, 8, 11, 10, 12, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1, GEMM_COMPUTE_FP32},  /* 3x3 stride 2 pad 1 */
    {2, 3, 17, 15, 8, 7, 7, 0, 0, 2, 2, 3, 3, 1, 1, 1, GEMM_COMPUTE_FP32},   /* 7x7 stride 2 pad 3 stem */
    {2, 8, 7, 7, 12, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 2, GEMM_COMPUTE_FP32},    /* 3x3 groups 2 */
};
enum { NGEO = sizeof GEO / sizeof GEO[0] };

Test(kernels_conv_nhwc, fp32_storage_is_the_nchw_op_transposed) {
    for (int g = 0; g < NGEO; g++) fp32_matches_nchw(GEO[g], 100 + 10 * g);
}

Test(kernels_conv_nhwc, bf16_storage_is_the_fp32_path_rounded_once) {
    for (int g = 0; g < NGEO; g++) bf16_is_fp32_rounded(GEO[g], 200 + 10 * g);
}
