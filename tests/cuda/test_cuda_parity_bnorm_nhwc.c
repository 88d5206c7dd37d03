/* test_cuda_parity_bnorm_nhwc.c — the channels-last ResNet ops (batch norm + residual + ReLU, max pool,
 * global average pool; kernels/cuda/bnorm_nhwc.cu, pool_nhwc.cu) against the CPU table, fp32 and bf16
 * storage, on ResNet-like small shapes (C 64 / 24 and odd C 3 / 5; M not a multiple of the GPU's
 * 64-row chunks, and one chunk only).
 *
 * Tolerance (llm.c's rule): |gpu - cpu| <= thr + |cpu| * eps, thr = 1e-5 of the tensor's largest |cpu|.
 *   fp32 outputs (y, gx, gz on fp32 storage; statistics, running statistics, gw, gb, average pool):
 *     eps 1e-5 (sums in another order, double per-channel totals on both sides)
 *   bf16 outputs: eps 2 * 2^-8: both sides round once from fp32 values that differ in the last bits,
 *     so one may round the other way: one bf16 step, at most 2 unit roundoffs (2^-8) of the value
 *   max pool (y, argmax, gx), gz and the average pool's gx: exact (the same operations in the same order)
 * The backward is given the CPU's forward output (the ReLU mask) and statistics on both sides. */
#include <math.h>
#include <string.h>

#include "tests/cuda/parity_util.h"

static const double BF16_EPS = 2.0 / 256, F32_EPS = 1e-5;

/* host floats -> a dt buffer on the host (bf16: rounded) and on the device */
static void *host_dt(const float *x, int64_t n, int dt) {
    void *h = malloc((size_t)(n ? n : 1) * er_dtype_size(dt));
    for (int64_t i = 0; i < n; i++) {
        if (dt == ER_BF16) ((uint16_t *)h)[i] = er_f32_to_bf16(x[i]);
        else ((float *)h)[i] = x[i];
    }
    return h;
}
static void *dev_dt(const void *h, int64_t n, int dt) {
    void *d = GPU->alloc((size_t)(n ? n : 1) * er_dtype_size(dt));
    GPU->upload(d, h, (size_t)n * er_dtype_size(dt));
    return d;
}
static float *widen_dt(const void *h, int64_t n, int dt) {
    float *f = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) f[i] = dt == ER_BF16 ? er_bf16_to_f32(((const uint16_t *)h)[i]) : ((const float *)h)[i];
    return f;
}

/* the device dt buffer d against the CPU's dt buffer ref: thr + |ref| eps (eps < 0: exact) */
static void expect_dt(const char *what, const void *ref, const void *d, int64_t n, int dt, double eps) {
    gpu_ok(what);
    void *h = malloc((size_t)(n ? n : 1) * er_dtype_size(dt));
    GPU->download(h, d, (size_t)n * er_dtype_size(dt));
    float *a = widen_dt(ref, n, dt), *b = widen_dt(h, n, dt);
    double scale = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(a[i])) scale = fmax(scale, fabs(a[i]));
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || eps < 0) {
            cr_assert(memcmp(a + i, b + i, 4) == 0 || (isnan(a[i]) && isnan(b[i])), "%s[%lld]: cpu %.9g, cuda %.9g (exact)",
                      what, (long long)i, a[i], b[i]);
            continue;
        }
        double tol = 1e-5 * scale + fabs(a[i]) * eps;
        cr_assert(fabs((double)a[i] - b[i]) <= tol, "%s[%lld]: cpu %.9g, cuda %.9g (tol %.3g, %s)", what, (long long)i, a[i],
                  b[i], tol, er_dtype_name(dt));
    }
    free(h); free(a); free(b);
}
static void expect_f32(const char *what, const float *ref, const float *d, int64_t n) {
    expect_dt(what, ref, d, n, ER_F32, F32_EPS);
}
static void nan_dt(void *h, int64_t n, int dt) {
    for (int64_t i = 0; i < n; i++) {
        if (dt == ER_BF16) ((uint16_t *)h)[i] = 0x7FC0;
        else ((float *)h)[i] = NAN;
    }
}

static void bn_case(int64_t M, int64_t C, int dt, int training, int relu, int with_z, uint32_t seed) {
    const int64_t n = M * C;
    const size_t es = er_dtype_size(dt);
    const double eps = dt == ER_BF16 ? BF16_EPS : F32_EPS;
    float *xf = rnd(n, -2, 3, seed), *zf = rnd(n, -1, 1, seed + 1), *gyf = rnd(n, -1, 1, seed + 2);
    float *g0f = rnd(n, -1, 1, seed + 3), *w = rnd(C, 0.5f, 1.5f, seed + 4), *b = rnd(C, -1, 1, seed + 5);
    float *rm = rnd(C, -0.2f, 0.2f, seed + 6), *rv = rnd(C, 0.5f, 1.5f, seed + 7);
    float *gw = rnd(C, -1, 1, seed + 8), *gb = rnd(C, -1, 1, seed + 9);
    void *x = host_dt(xf, n, dt), *z = with_z ? host_dt(zf, n, dt) : NULL, *gy = host_dt(gyf, n, dt);
    void *g0 = host_dt(g0f, n, dt), *y = malloc(n * es);
    float *st = malloc(C * 8);
    void *dx = dev_dt(x, n, dt), *dz = with_z ? dev_dt(z, n, dt) : NULL, *dgy = dev_dt(gy, n, dt);
    void *dy = GPU->alloc(n * es);
    float *dw = devf(w, C), *db = devf(b, C), *drm = devf(rm, C), *drv = devf(rv, C), *dst = GPU->alloc(C * 8);
    CPU->batchnorm_nhwc(M, C, dt, x, w, b, rm, rv, training, 0.1f, 1e-5f, z, relu, y, st, st + C);
    GPU->batchnorm_nhwc(M, C, dt, dx, dw, db, drm, drv, training, 0.1f, 1e-5f, dz, relu, dy, dst, dst + C);
    expect_dt("batchnorm_nhwc y", y, dy, n, dt, eps);
    expect_f32("batchnorm_nhwc mean", st, dst, C);
    expect_f32("batchnorm_nhwc rstd", st + C, dst + C, C);
    expect_f32("batchnorm_nhwc running_mean", rm, drm, C);
    expect_f32("batchnorm_nhwc running_var", rv, drv, C);
    /* the backward on the CPU's forward (mask and statistics), acc 0 into NaN and acc 1 onto g0 */
    GPU->upload(dy, y, n * es);
    GPU->upload(dst, st, C * 8);
    const void *ym = relu ? y : NULL, *dym = relu ? dy : NULL;
    float *wc = work_of(CPU, CPU->batchnorm_nhwc_backward_workspace(M, C));
    float *wg = work_of(GPU, GPU->batchnorm_nhwc_backward_workspace(M, C));
    void *gx = malloc(n * es), *gz = malloc(n * es), *dgx = GPU->alloc(n * es), *dgz = GPU->alloc(n * es);
    float *dgw = devf(gw, C), *dgb = devf(gb, C);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(gx, g0, n * es), memcpy(gz, g0, n * es);
        else nan_dt(gx, n, dt), nan_dt(gz, n, dt);
        GPU->upload(dgx, gx, n * es);
        GPU->upload(dgz, gz, n * es);
        CPU->batchnorm_nhwc_backward(M, C, dt, x, w, st, st + C, gy, ym, training, 1e-5f, gx, acc, gw, gb,
                                     with_z ? gz : NULL, acc, wc);
        GPU->batchnorm_nhwc_backward(M, C, dt, dx, dw, dst, dst + C, dgy, dym, training, 1e-5f, dgx, acc, dgw, dgb,
                                     with_z ? dgz : NULL, acc, wg);
        expect_dt(acc ? "batchnorm_nhwc gx (+=)" : "batchnorm_nhwc gx (written)", gx, dgx, n, dt, eps);
        if (with_z) expect_dt(acc ? "batchnorm_nhwc gz (+=)" : "batchnorm_nhwc gz (written)", gz, dgz, n, dt, -1);
        expect_f32("batchnorm_nhwc gw", gw, dgw, C);
        expect_f32("batchnorm_nhwc gb", gb, dgb, C);
    }
    /* the weight gradients alone, then gz alone (a shortcut whose batch norm has frozen statistics) */
    CPU->batchnorm_nhwc_backward(M, C, dt, x, w, st, st + C, gy, ym, training, 1e-5f, NULL, 0, gw, gb, NULL, 0, wc);
    GPU->batchnorm_nhwc_backward(M, C, dt, dx, dw, dst, dst + C, dgy, dym, training, 1e-5f, NULL, 0, dgw, dgb, NULL, 0, wg);
    expect_f32("batchnorm_nhwc gw (no gx)", gw, dgw, C);
    expect_f32("batchnorm_nhwc gb (no gx)", gb, dgb, C);
    nan_dt(gz, n, dt);
    GPU->upload(dgz, gz, n * es);
    CPU->batchnorm_nhwc_backward(M, C, dt, x, w, st, st + C, gy, ym, training, 1e-5f, NULL, 0, NULL, NULL, gz, 0, wc);
    GPU->batchnorm_nhwc_backward(M, C, dt, dx, dw, dst, dst + C, dgy, dym, training, 1e-5f, NULL, 0, NULL, NULL, dgz, 0, wg);
    expect_dt("batchnorm_nhwc gz alone", gz, dgz, n, dt, -1);
    CPU->free(wc); GPU->free(wg);
    GPU->free(dx); GPU->free(dgy); GPU->free(dy); GPU->free(dw); GPU->free(db); GPU->free(drm); GPU->free(drv);
    GPU->free(dst); GPU->free(dgx); GPU->free(dgz); GPU->free(dgw); GPU->free(dgb);
    if (dz) GPU->free(dz);
    free(xf); free(zf); free(gyf); free(g0f); free(w); free(b); free(rm); free(rv); free(gw); free(gb);
    free(x); free(z); free(gy); free(g0); free(y); free(st); free(gx); free(gz);
}

PARITY_COVERS(batchnorm_nhwc);
PARITY_COVERS(batchnorm_nhwc_backward_workspace);
PARITY_COVERS(batchnorm_nhwc_backward);
Test(cuda, batchnorm_nhwc_fused_residual_relu) {
    require_gpu();
    /* M C: a ResNet stage-4 map (2 x 7 x 7, C 64), a 2 x 14 x 14 map with C 24, odd C with M not a multiple
     * of 64 (3 chunks), and a single chunk (the statistics' partials in rstd) */
    const int64_t shapes[][2] = {{98, 64}, {392, 24}, {130, 5}, {37, 3}};
    uint32_t seed = 900;
    for (int s = 0; s < 4; s++)
        for (int dt = 0; dt < 2; dt++)
            for (int training = 0; training <= 1; training++)
                for (int fused = 0; fused < 4; fused++, seed += 16) /* relu, z: each on and off */
                    bn_case(shapes[s][0], shapes[s][1], dt, training, fused & 1, fused >> 1, seed);
}

static void pool_case(pool2d_args a, int dt, uint32_t seed) {
    pool2d_args_fill(&a);
    const int64_t HW = (int64_t)a.H * a.W, nx = (int64_t)a.N * HW * a.C, ny = (int64_t)a.N * a.P * a.Q * a.C;
    const size_t es = er_dtype_size(dt);
    float *xf = rnd(nx, -2, 2, seed), *gyf = rnd(ny, -1, 1, seed + 1), *g0f = rnd(nx, -1, 1, seed + 2);
    for (int64_t i = 0; i < nx; i += 3) xf[i] = roundf(xf[i]); /* ties */
    xf[(a.W + 1) * a.C + 1] = NAN;                              /* image 0, pixel (1, 1), channel 1 */
    void *x = host_dt(xf, nx, dt), *gy = host_dt(gyf, ny, dt), *g0 = host_dt(g0f, nx, dt);
    void *y = malloc(ny * es), *gx = malloc(nx * es);
    int32_t *am = malloc(ny * 4), *dam = GPU->alloc(ny * 4);
    void *dx = dev_dt(x, nx, dt), *dgy = dev_dt(gy, ny, dt), *dy = GPU->alloc(ny * es), *dgx = GPU->alloc(nx * es);
    CPU->maxpool2d_nhwc(&a, dt, x, y, am);
    GPU->maxpool2d_nhwc(&a, dt, dx, dy, dam);
    expect_dt("maxpool2d_nhwc y", y, dy, ny, dt, -1);
    expect_same_i32("maxpool2d_nhwc argmax", am, dam, ny);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(gx, g0, nx * es);
        else nan_dt(gx, nx, dt);
        GPU->upload(dgx, gx, nx * es);
        CPU->maxpool2d_nhwc_backward(&a, dt, gy, am, gx, acc);
        GPU->maxpool2d_nhwc_backward(&a, dt, dgy, dam, dgx, acc);
        expect_dt(acc ? "maxpool2d_nhwc gx (+=)" : "maxpool2d_nhwc gx (written)", gx, dgx, nx, dt, -1);
    }
    /* global average pool over the same x (its NaN makes one NaN output: masked to 0 here) */
    xf[(a.W + 1) * a.C + 1] = 0.5f;
    free(x);
    x = host_dt(xf, nx, dt);
    GPU->upload(dx, x, nx * es);
    float *ay = malloc(a.N * a.C * 4), *day = GPU->alloc(a.N * a.C * 4), *agy = rnd(a.N * a.C, -1, 1, seed + 3);
    float *dagy = devf(agy, a.N * a.C);
    CPU->avgpool_nhwc(a.N, HW, a.C, dt, x, ay);
    GPU->avgpool_nhwc(a.N, HW, a.C, dt, dx, day);
    expect_f32("avgpool_nhwc y", ay, day, a.N * a.C);
    for (int acc = 0; acc <= 1; acc++) {
        if (acc) memcpy(gx, g0, nx * es);
        else nan_dt(gx, nx, dt);
        GPU->upload(dgx, gx, nx * es);
        CPU->avgpool_nhwc_backward(a.N, HW, a.C, dt, agy, gx, acc);
        GPU->avgpool_nhwc_backward(a.N, HW, a.C, dt, dagy, dgx, acc);
        expect_dt(acc ? "avgpool_nhwc gx (+=)" : "avgpool_nhwc gx (written)", gx, dgx, nx, dt, -1);
    }
    GPU->free(dam); GPU->free(dx); GPU->free(dgy); GPU->free(dy); GPU->free(dgx); GPU->free(day); GPU->free(dagy);
    free(xf); free(gyf); free(g0f); free(x); free(gy); free(g0); free(y); free(gx); free(am); free(ay); free(agy);
}

PARITY_COVERS(maxpool2d_nhwc);
PARITY_COVERS(maxpool2d_nhwc_backward);
PARITY_COVERS(avgpool_nhwc);
PARITY_COVERS(avgpool_nhwc_backward);
Test(cuda, maxpool_avgpool_nhwc) {
    require_gpu();
    /* N C H W R S P Q sh sw ph pw: ResNet's stem pool (3x3 stride 2 pad 1), 2x2 stride 2, 3x3 stride 1 */
    const pool2d_args geo[] = {{2, 64, 9, 7, 3, 3, 0, 0, 2, 2, 1, 1}, {1, 5, 8, 8, 2, 2, 0, 0, 2, 2, 0, 0},
                               {2, 3, 6, 5, 3, 3, 0, 0, 1, 1, 1, 1}};
    for (int g = 0; g < 3; g++)
        for (int dt = 0; dt < 2; dt++) pool_case(geo[g], dt, 950 + 8 * g);
}
