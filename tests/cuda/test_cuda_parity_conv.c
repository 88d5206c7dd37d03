/* test_cuda_parity_conv.c — the NCHW image ops of the CUDA table (cuDNN convolution and batch norm,
 * own pooling kernels) against the CPU table on the same random inputs. Tolerances as in
 * test_cuda_parity.c: 1e-5 for fp32 arithmetic in another summation order (cuDNN runs with FMA
 * maths, no TF32), exact for max pooling and its argmax. Skips without a GPU. */
#include "tests/cuda/parity_util.h"

static void conv_case(conv2d_args a, int bias) {
    conv2d_args_fill(&a);
    const int64_t nx = (int64_t)a.N * a.C * a.H * a.W, nw = (int64_t)a.K * (a.C / a.groups) * a.R * a.S;
    const int64_t ny = (int64_t)a.N * a.K * a.P * a.Q;
    float *x = rnd(nx, -1, 1, 200), *w = rnd(nw, -0.5f, 0.5f, 201), *b = rnd(a.K, -1, 1, 202);
    float *gy = rnd(ny, -1, 1, 203), *y = malloc(ny * 4);
    float *dx = devf(x, nx), *dw = devf(w, nw), *db = devf(b, a.K), *dgy = devf(gy, ny);
    float *dy = GPU->alloc(ny * 4);
    float *wc = work_of(CPU, CPU->conv2d_workspace(&a)), *wg = work_of(GPU, GPU->conv2d_workspace(&a));
    CPU->conv2d(&a, x, w, bias ? b : NULL, y, wc);
    GPU->conv2d(&a, dx, dw, bias ? db : NULL, dy, wg);
    expect_close("conv2d y", y, dy, ny, 1e-5);
    CPU->free(wc);
    GPU->free(wg);
    /* gradients accumulate into random starting values */
    float *gx = rnd(nx, -1, 1, 204), *gw = rnd(nw, -1, 1, 205), *gb = rnd(a.K, -1, 1, 206);
    float *dgx = devf(gx, nx), *dgw = devf(gw, nw), *dgb = devf(gb, a.K);
    wc = work_of(CPU, CPU->conv2d_backward_workspace(&a));
    wg = work_of(GPU, GPU->conv2d_backward_workspace(&a));
    CPU->conv2d_backward(&a, x, w, gy, gx, gw, bias ? gb : NULL, wc, 1);
    GPU->conv2d_backward(&a, dx, dw, dgy, dgx, dgw, bias ? dgb : NULL, wg, 1);
    expect_close("conv2d gx", gx, dgx, nx, 1e-5);
    expect_close("conv2d gw", gw, dgw, nw, 1e-5);
    if (bias) expect_close("conv2d gb", gb, dgb, a.K, 1e-5);
    /* a fresh gx (gx_acc 0) is written without being read: NaN before, every element after */
    for (int64_t i = 0; i < nx; i++) gx[i] = NAN;
    GPU->upload(dgx, gx, nx * sizeof(float));
    CPU->conv2d_backward(&a, x, w, gy, gx, NULL, NULL, wc, 0);
    GPU->conv2d_backward(&a, dx, dw, dgy, dgx, NULL, NULL, wg, 0);
    expect_all_written("conv2d gx (gx_acc 0)", gx, nx);
    expect_close("conv2d gx written (gx_acc 0)", gx, dgx, nx, 1e-5);
    /* the filter gradient alone (the input needs none: a stem convolution) */
    CPU->conv2d_backward(&a, x, w, gy, NULL, gw, NULL, wc, 1);
    GPU->conv2d_backward(&a, dx, dw, dgy, NULL, dgw, NULL, wg, 1);
    expect_close("conv2d gw only", gw, dgw, nw, 1e-5);
    CPU->free(wc);
    GPU->free(wg);
    GPU->free(dx); GPU->free(dw); GPU->free(db); GPU->free(dgy); GPU->free(dy);
    GPU->free(dgx); GPU->free(dgw); GPU->free(dgb);
    free(x); free(w); free(b); free(gy); free(y); free(gx); free(gw); free(gb);
}

PARITY_COVERS(conv2d_workspace);
PARITY_COVERS(conv2d);
PARITY_COVERS(conv2d_backward_workspace);
PARITY_COVERS(conv2d_backward);
Test(cuda, conv2d_forward_backward) {
    require_gpu();
    /* N C H W K R S P Q sh sw ph pw dh dw groups compute (fp32: tolerance 1e-5) */
    conv_case((conv2d_args){2, 3, 15, 13, 8, 7, 7, 0, 0, 2, 2, 3, 3, 1, 1, 1, GEMM_COMPUTE_FP32}, 0);  /* stem */
    conv_case((conv2d_args){3, 8, 9, 7, 6, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 1, GEMM_COMPUTE_FP32}, 1);   /* 3x3 same */
    conv_case((conv2d_args){2, 8, 9, 9, 16, 1, 1, 0, 0, 2, 2, 0, 0, 1, 1, 1, GEMM_COMPUTE_FP32}, 0);  /* 1x1 stride 2 */
    conv_case((conv2d_args){2, 6, 8, 11, 4, 3, 2, 0, 0, 2, 1, 2, 1, 1, 2, 1, GEMM_COMPUTE_FP32}, 1);  /* dilation, non-square */
    conv_case((conv2d_args){2, 8, 7, 7, 8, 3, 3, 0, 0, 1, 1, 1, 1, 1, 1, 8, GEMM_COMPUTE_FP32}, 1);   /* depthwise */
}

static void bn_case(int64_t N, int64_t C, int64_t HW, int training, int relu) {
    const int64_t n = N * C * HW;
    float *x = rnd(n, -2, 3, 210), *w = rnd(C, 0.5f, 1.5f, 211), *b = rnd(C, -1, 1, 212);
    float *rm = rnd(C, -0.2f, 0.2f, 213), *rv = rnd(C, 0.5f, 1.5f, 214), *gy = rnd(n, -1, 1, 215);
    float *dx = devf(x, n), *dw = devf(w, C), *db = devf(b, C), *drm = devf(rm, C), *drv = devf(rv, C);
    float *dgy = devf(gy, n), *y = malloc(n * 4), *st = malloc(2 * C * 4);
    float *dy = GPU->alloc(n * 4), *dst = GPU->alloc(2 * C * 4);
    CPU->batchnorm(N, C, HW, x, w, b, rm, rv, training, 0.1f, 1e-5f, relu, y, st, st + C);
    GPU->batchnorm(N, C, HW, dx, dw, db, drm, drv, training, 0.1f, 1e-5f, relu, dy, dst, dst + C);
    expect_close("batchnorm y", y, dy, n, 1e-5);
    expect_close("batchnorm mean", st, dst, C, 1e-5);
    expect_close("batchnorm rstd", st + C, dst + C, C, 1e-5);
    expect_close("batchnorm running_mean", rm, drm, C, 1e-5);
    expect_close("batchnorm running_var", rv, drv, C, 1e-5);
    { /* the backward; with relu the fused ReLU's mask comes from the forward's output */
        const float *ry = relu ? y : NULL, *dry = relu ? dy : NULL;
        float *gx = rnd(n, -1, 1, 216), *gw = rnd(C, -1, 1, 217), *gb = rnd(C, -1, 1, 218);
        float *dgx = devf(gx, n), *dgw = devf(gw, C), *dgb = devf(gb, C);
        float *wc = work_of(CPU, CPU->batchnorm_backward_workspace(N, C, HW, relu));
        float *wg = work_of(GPU, GPU->batchnorm_backward_workspace(N, C, HW, relu));
        CPU->batchnorm_backward(N, C, HW, x, w, st, st + C, gy, ry, training, 1e-5f, gx, gw, gb, wc, 1);
        GPU->batchnorm_backward(N, C, HW, dx, dw, dst, dst + C, dgy, dry, training, 1e-5f, dgx, dgw, dgb, wg, 1);
        expect_close("batchnorm gx", gx, dgx, n, 1e-5);
        expect_close("batchnorm gw", gw, dgw, C, 1e-5);
        expect_close("batchnorm gb", gb, dgb, C, 1e-5);
        /* without the input gradient, and with only the input gradient */
        CPU->batchnorm_backward(N, C, HW, x, w, st, st + C, gy, ry, training, 1e-5f, NULL, gw, gb, wc, 1);
        GPU->batchnorm_backward(N, C, HW, dx, dw, dst, dst + C, dgy, dry, training, 1e-5f, NULL, dgw, dgb, wg, 1);
        expect_close("batchnorm gw (no gx)", gw, dgw, C, 1e-5);
        CPU->batchnorm_backward(N, C, HW, x, w, st, st + C, gy, ry, training, 1e-5f, gx, NULL, NULL, wc, 1);
        GPU->batchnorm_backward(N, C, HW, dx, dw, dst, dst + C, dgy, dry, training, 1e-5f, dgx, NULL, NULL, wg, 1);
        expect_close("batchnorm gx (no gw, gb)", gx, dgx, n, 1e-5);
        /* a fresh gx (gx_acc 0), with and without gw / gb: NaN before, written after */
        for (int with_w = 0; with_w <= 1; with_w++) {
            for (int64_t i = 0; i < n; i++) gx[i] = NAN;
            GPU->upload(dgx, gx, n * sizeof(float));
            CPU->batchnorm_backward(N, C, HW, x, w, st, st + C, gy, ry, training, 1e-5f, gx, with_w ? gw : NULL,
                                    with_w ? gb : NULL, wc, 0);
            GPU->batchnorm_backward(N, C, HW, dx, dw, dst, dst + C, dgy, dry, training, 1e-5f, dgx, with_w ? dgw : NULL,
                                    with_w ? dgb : NULL, wg, 0);
            expect_all_written("batchnorm gx (gx_acc 0)", gx, n);
            expect_close("batchnorm gx written (gx_acc 0)", gx, dgx, n, 1e-5);
            if (with_w) expect_close("batchnorm gw beside a written gx", gw, dgw, C, 1e-5);
        }
        CPU->free(wc);
        GPU->free(wg);
        GPU->free(dgx); GPU->free(dgw); GPU->free(dgb);
        free(gx); free(gw); free(gb);
    }
    GPU->free(dx); GPU->free(dw); GPU->free(db); GPU->free(drm); GPU->free(drv); GPU->free(dgy);
    GPU->free(dy); GPU->free(dst);
    free(x); free(w); free(b); free(rm); free(rv); free(gy); free(y); free(st);
}

PARITY_COVERS(batchnorm);
PARITY_COVERS(batchnorm_backward_workspace);
PARITY_COVERS(batchnorm_backward);
Test(cuda, batchnorm_train_eval_relu) {
    require_gpu();
    bn_case(4, 6, 35, 1, 0);  /* training */
    bn_case(4, 6, 35, 0, 0);  /* eval */
    bn_case(3, 5, 1, 1, 0);   /* [N, C] rows */
    bn_case(2, 7, 20, 0, 1);  /* fused eval BN + ReLU */
    bn_case(2, 7, 20, 1, 1);  /* training BN + ReLU */
}

PARITY_COVERS(maxpool2d);
PARITY_COVERS(maxpool2d_backward);
PARITY_COVERS(adaptive_avgpool2d);
PARITY_COVERS(adaptive_avgpool2d_backward);
Test(cuda, maxpool_and_adaptive_avgpool) {
    require_gpu();
    const pool2d_args geo[] = {{2, 3, 11, 9, 3, 3, 0, 0, 2, 2, 1, 1}, {1, 2, 8, 8, 2, 2, 0, 0, 2, 2, 0, 0},
                               {2, 2, 7, 6, 3, 3, 0, 0, 1, 1, 1, 1}};
    for (int g = 0; g < 3; g++) {
        pool2d_args a = geo[g];
        pool2d_args_fill(&a);
        int64_t nx = (int64_t)a.N * a.C * a.H * a.W, ny = (int64_t)a.N * a.C * a.P * a.Q;
        float *x = rnd(nx, -2, 2, 220 + g);
        for (int64_t i = 0; i < nx; i += 3) x[i] = roundf(x[i]); /* ties */
        float *gy = rnd(ny, -1, 1, 223), *y = malloc(ny * 4), *gx = rnd(nx, -1, 1, 224);
        int32_t *am = malloc(ny * 4), *dam = GPU->alloc(ny * 4);
        float *dx = devf(x, nx), *dgy = devf(gy, ny), *dy = GPU->alloc(ny * 4), *dgx = devf(gx, nx);
        CPU->maxpool2d(&a, x, y, am);
        GPU->maxpool2d(&a, dx, dy, dam);
        expect_close("maxpool2d y", y, dy, ny, 0);
        expect_same_i32("maxpool2d argmax", am, dam, ny);
        CPU->maxpool2d_backward(&a, gy, am, gx);
        GPU->maxpool2d_backward(&a, dgy, dam, dgx);
        expect_close("maxpool2d gx", gx, dgx, nx, 1e-6);
        GPU->free(dam); GPU->free(dx); GPU->free(dgy); GPU->free(dy); GPU->free(dgx);
        free(x); free(gy); free(y); free(gx); free(am);
    }
    const int ad[][4] = {{7, 5, 3, 2}, {9, 9, 1, 1}, {4, 6, 4, 6}, {5, 3, 7, 4}}; /* H W OH OW */
    for (int g = 0; g < 4; g++) {
        int H = ad[g][0], W = ad[g][1], OH = ad[g][2], OW = ad[g][3];
        int64_t NC = 6, nx = NC * H * W, ny = NC * OH * OW;
        float *x = rnd(nx, -2, 2, 230), *gy = rnd(ny, -1, 1, 231), *y = malloc(ny * 4), *gx = rnd(nx, -1, 1, 232);
        float *dx = devf(x, nx), *dgy = devf(gy, ny), *dy = GPU->alloc(ny * 4), *dgx = devf(gx, nx);
        CPU->adaptive_avgpool2d(NC, H, W, OH, OW, x, y);
        GPU->adaptive_avgpool2d(NC, H, W, OH, OW, dx, dy);
        expect_close("adaptive_avgpool2d", y, dy, ny, 1e-5);
        CPU->adaptive_avgpool2d_backward(NC, H, W, OH, OW, gy, gx);
        GPU->adaptive_avgpool2d_backward(NC, H, W, OH, OW, dgy, dgx);
        expect_close("adaptive_avgpool2d_backward", gx, dgx, nx, 1e-5);
        GPU->free(dx); GPU->free(dgy); GPU->free(dy); GPU->free(dgx);
        free(x); free(gy); free(y); free(gx);
    }
}
