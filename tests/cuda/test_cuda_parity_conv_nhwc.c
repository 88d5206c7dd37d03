/* test_cuda_parity_conv_nhwc.c — the channels-last convolution of the CUDA table (cuDNN, NHWC tensors,
 * KRSC filter, fp32 or bf16 storage) against the CPU table on ResNet-50's shapes in small: forward,
 * input gradient written and accumulated, filter gradient accumulated into the fp32 master.
 *
 * Tolerances, the llm.c rule |cuda - cpu| <= thr + |cpu| eps:
 *   fp32 storage   as test_cuda_parity_conv.c: 1e-5 of the element and of the tensor's scale
 *                  (fp32 with FMA maths in another summation order)
 *   bf16 output    eps 2^-7: each side is its own fp32 result rounded once (at most half a bf16
 *                  step, 2^-8 relative), and the two fp32 results differ only by summation order,
 *                  so they may round apart by one step; thr 1e-5 of the tensor's scale for
 *                  cancelling sums near 0
 *   gw (bf16 run)  gw = old + round(dw): the same eps on the increment |cpu - old|, thr as above.
 * That rule alone would pass a weight rounding that truncates (a bias of ~2^-9 of a sum), so the
 * activations and gradients are drawn on a grid (k/16, |k| <= 16) and the weights' magnitudes kept in
 * [1/16, 1/2): every product and sum of the bf16 runs is then exact in fp32 whatever the order, the
 * backends' fp32 results agree and so do their roundings. A bf16 run may differ by one step in at
 * most 1/64 of the elements (room for an algorithm that does not sum exactly, e.g. Winograd on a
 * real GPU); a rounding or layout bug moves far more. */
#include <math.h>
#include <string.h>

#include "tests/cuda/parity_util.h"

#define BF16_EPS (1.0 / 128)  /* 2 x 2^-8: two independent roundings to bf16 */
#define FP32_TOL 1e-5

/* n values of type dt from the fp32 values v (bf16: rounded) */
static void *host_dt(int dt, const float *v, int64_t n) {
    void *h = malloc((size_t)(n ? n : 1) * er_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        if (dt == ER_BF16) ((uint16_t *)h)[i] = er_f32_to_bf16(v[i]);
        else ((float *)h)[i] = v[i];
    }
    return h;
}
static float widen(int dt, const void *p, int64_t i) {
    return dt == ER_BF16 ? er_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static void *dev_dt(int dt, const void *h, int64_t n) { return dev_from(h, (size_t)n * er_dtype_size(dt)); }

/* n values k/16, k an integer in [-16, 16] */
static float *grid(int64_t n, uint32_t tag) {
    float *v = rnd(n, -1, 1, tag);
    for (int64_t i = 0; i < n; i++) v[i] = roundf(v[i] * 16) / 16;
    return v;
}
/* n weights of magnitude in [1/16, 1/2), either sign, full fp32 mantissas (rounding to bf16 matters) */
static float *weights(int64_t n, uint32_t tag) {
    float *v = rnd(n, -1, 1, tag);
    for (int64_t i = 0; i < n; i++) v[i] = copysignf(0.0625f + 0.4375f * fabsf(v[i]), v[i]);
    return v;
}

/* the CUDA result d (device, type dt) against the CPU's ref (host, type dt); old (fp32, may be
 * NULL): the values an fp32 result was accumulated into, whose bf16-rounded increment sets eps's scale */
static void expect_dt_close(const char *what, int dt, const void *ref, const void *d, int64_t n, const float *old) {
    gpu_ok(what);
    void *got = malloc((size_t)(n ? n : 1) * er_dtype_size(dt));
    GPU->download(got, d, (size_t)n * er_dtype_size(dt));
    double scale = 0;
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(widen(dt, ref, i)));
    for (int64_t i = 0; i < n; i++) {
        double a = widen(dt, ref, i), b = widen(dt, got, i), tol;
        differ += a != b;
        if (dt == ER_F32 && !old) tol = FP32_TOL * (fabs(a) + scale);
        else tol = FP32_TOL * scale + BF16_EPS * fabs(old ? a - old[i] : a);
        if (!(fabs(a - b) <= tol))
            cr_assert_fail("%s (%s): element %lld: cpu %.9g, cuda %.9g (tolerance %.3g, tensor scale %g, n %lld)", what,
                           er_dtype_name(dt), (long long)i, a, b, tol, scale, (long long)n);
    }
    /* a bf16 run on the grid: exact sums, so (nearly) the same bits */
    if (dt == ER_BF16 || old)
        cr_assert(differ * 64 <= n, "%s: %lld of %lld elements differ (at most 1/64 may: exact sums on the grid)", what,
                  (long long)differ, (long long)n);
    free(got);
}

/* every element of the CPU's write-only result set (its NaN start overwritten) */
static void expect_written(const char *what, int dt, const void *ref, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += isnan(widen(dt, ref, i));
    cr_expect_eq(bad, 0, "%s: %lld of %lld elements left unwritten (NaN) on the CPU", what, (long long)bad, (long long)n);
}

static void nhwc_case(conv2d_args a, int dt) {
    a.compute = dt == ER_BF16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32;
    conv2d_args_fill(&a);
    const int64_t nx = (int64_t)a.N * a.H * a.W * a.C, ny = (int64_t)a.N * a.P * a.Q * a.K;
    const int64_t nw = (int64_t)a.K * (a.C / a.groups) * a.R * a.S;
    const size_t es = er_dtype_size(dt);
    float *xf = grid(nx, 240), *gyf = grid(ny, 241), *gx0f = grid(nx, 242);
    float *w = weights(nw, 243), *gw0 = rnd(nw, -1, 1, 244), *gw = copyf(gw0, nw);
    void *x = host_dt(dt, xf, nx), *gy = host_dt(dt, gyf, ny), *gx = host_dt(dt, gx0f, nx), *y = malloc(ny * es);
    void *dx = dev_dt(dt, x, nx), *dgy = dev_dt(dt, gy, ny), *dgx = dev_dt(dt, gx, nx), *dy = GPU->alloc(ny * es);
    float *dw = devf(w, nw), *dgw = devf(gw0, nw);
    float *wc = work_of(CPU, CPU->conv2d_nhwc_workspace(&a, dt)), *wg = work_of(GPU, GPU->conv2d_nhwc_workspace(&a, dt));
    CPU->conv2d_nhwc(&a, dt, x, w, y, wc);
    GPU->conv2d_nhwc(&a, dt, dx, dw, dy, wg);
    expect_dt_close("conv2d_nhwc y", dt, y, dy, ny, NULL);
    CPU->free(wc);
    GPU->free(wg);
    wc = work_of(CPU, CPU->conv2d_nhwc_backward_workspace(&a, dt));
    wg = work_of(GPU, GPU->conv2d_nhwc_backward_workspace(&a, dt));
    /* both gradients, accumulated into random starting values */
    CPU->conv2d_nhwc_backward(&a, dt, x, w, gy, gx, gw, wc, 1);
    GPU->conv2d_nhwc_backward(&a, dt, dx, dw, dgy, dgx, dgw, wg, 1);
    expect_dt_close("conv2d_nhwc gx (gx_acc 1)", dt, gx, dgx, nx, NULL);
    expect_dt_close("conv2d_nhwc gw (+=)", ER_F32, gw, dgw, nw, dt == ER_BF16 ? gw0 : NULL);
    /* a fresh gx (gx_acc 0) alone is written without being read: NaN before, every element after */
    for (int64_t i = 0; i < nx; i++) gx0f[i] = NAN;
    free(gx);
    gx = host_dt(dt, gx0f, nx);
    GPU->upload(dgx, gx, nx * es);
    CPU->conv2d_nhwc_backward(&a, dt, x, w, gy, gx, NULL, wc, 0);
    GPU->conv2d_nhwc_backward(&a, dt, dx, dw, dgy, dgx, NULL, wg, 0);
    expect_written("conv2d_nhwc gx (gx_acc 0)", dt, gx, nx);
    expect_dt_close("conv2d_nhwc gx written (gx_acc 0)", dt, gx, dgx, nx, NULL);
    /* the filter gradient alone, from zero this time (the stem: no input gradient) */
    memset(gw, 0, nw * 4);
    memset(gw0, 0, nw * 4);
    GPU->upload(dgw, gw, nw * 4);
    CPU->conv2d_nhwc_backward(&a, dt, x, w, gy, NULL, gw, wc, 1);
    GPU->conv2d_nhwc_backward(&a, dt, dx, dw, dgy, NULL, dgw, wg, 1);
    expect_dt_close("conv2d_nhwc gw only (from 0)", ER_F32, gw, dgw, nw, dt == ER_BF16 ? gw0 : NULL);
    CPU->free(wc);
    GPU->free(wg);
    GPU->free(dx); GPU->free(dgy); GPU->free(dgx); GPU->free(dy); GPU->free(dw); GPU->free(dgw);
    free(xf); free(gyf); free(gx0f); free(w); free(gw0); free(gw); free(x); free(gy); free(gx); free(y);
}

PARITY_COVERS(conv2d_nhwc_workspace);
PARITY_COVERS(conv2d_nhwc);
PARITY_COVERS(conv2d_nhwc_backward_workspace);
PARITY_COVERS(conv2d_nhwc_backward);
Test(cuda, conv2d_nhwc_fp32_and_bf16) {
    require_gpu();
    /* N C H W K R S P Q sh sw ph pw dh dw groups compute (set per storage type) */
    const conv2d_args geo[] = {
        {2, 16, 8, 8, 32, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0},   /* bottleneck 1x1, C 16 -> K 32 */
        {2, 16, 9, 9, 16, 3, 3, 0, 0, 2, 2, 1, 1, 1, 1, 1, 0},   /* 3x3 stride 2 pad 1 */
        {2, 3, 15, 13, 8, 7, 7, 0, 0, 2, 2, 3, 3, 1, 1, 1, 0},   /* stem 7x7 stride 2 pad 3, C 3 */
        {2, 16, 9, 9, 32, 1, 1, 0, 0, 2, 2, 0, 0, 1, 1, 1, 0},   /* downsample 1x1 stride 2 */
        {2, 8, 7, 6, 12, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 2, 0},    /* groups 2 */
    };
    for (int dt = ER_F32; dt <= ER_BF16; dt++)
        for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) nhwc_case(geo[g], dt);
}
