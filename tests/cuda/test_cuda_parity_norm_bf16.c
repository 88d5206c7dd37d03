/* test_cuda_parity_norm_bf16.c — layernorm and bias+GELU with bf16 storage on the GPU against the
 * CPU table. Both compute in fp32 from the same widened inputs and round once, but their fp32
 * results differ by summation order (~1e-6 relative, as the fp32 parity tests allow), so a bf16
 * output may round the other way: at most one bf16 step apart (2^-8 relative), and the fp32
 * outputs (statistics, weight and bias gradients, an fp32 gx) within the fp32 tolerances. Then a
 * pre-norm MLP on bf16 activations through the op layer (layernorm to bf16, linear, bias+GELU,
 * linear_add onto the fp32 residual), forward and backward, on the device against the CPU. */
#include <math.h>
#include <string.h>

#include "nn/autograd.h"
#include "nn/ops.h"
#include "tests/cuda/parity_util.h"

static void *dev_bytes(const void *h, size_t bytes) {
    void *d = GPU->alloc(bytes ? bytes : 4);
    if (bytes) GPU->upload(d, h, bytes);
    return d;
}

static uint16_t *bf16_of(const float *x, int64_t n) {
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) h[i] = er_f32_to_bf16(x[i]);
    return h;
}

/* GPU bf16 buffer d against the CPU's ref: within one bf16 step of each other (|a - b| <= 2^-7 max(|a|, |b|),
 * plus 1e-6 of the tensor's scale for values near 0) */
static void expect_bf16_close(const char *what, const uint16_t *ref, const void *d, int64_t n) {
    gpu_ok(what);
    uint16_t *h = malloc((size_t)(n ? n : 1) * 2);
    GPU->download(h, d, (size_t)n * 2);
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(er_bf16_to_f32(ref[i])));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = er_bf16_to_f32(ref[i]), b = er_bf16_to_f32(h[i]);
        differ += h[i] != ref[i];
        cr_assert(fabs(a - b) <= fmax(fabs(a), fabs(b)) / 128 + scale * 1e-6, "%s[%lld]: GPU %.6g, CPU %.6g", what,
                  (long long)i, b, a);
    }
    cr_log_info("%s: %lld of %lld bf16 values differ by one step", what, (long long)differ, (long long)n);
    free(h);
}

Test(cuda, layernorm_bf16_storage) {
    require_gpu();
    const int64_t sizes[3][2] = {{1, 5}, {67, 384}, {9, 1030}};
    for (int s = 0; s < 3; s++) {
        const int64_t R = sizes[s][0], C = sizes[s][1], n = R * C;
        float *xf = rnd(n, -3, 3, 500 + s), *gyf = rnd(n, -1, 1, 510 + s), *gx0f = rnd(n, -1, 1, 520 + s);
        float *w = rnd(C, 0.5f, 1.5f, 530 + s), *b = rnd(C, -0.5f, 0.5f, 540 + s);
        uint16_t *x = bf16_of(xf, n), *gy = bf16_of(gyf, n), *gx0 = bf16_of(gx0f, n);
        float *dw = devf(w, C), *db = devf(b, C);
        for (int xt = 0; xt < 2; xt++) {
            /* xt bf16: x, gx bf16; the residual stream's form xt fp32: x, gx fp32; y and gy bf16 both times */
            const void *xin = xt == ER_BF16 ? (const void *)x : (const void *)xf;
            size_t xbytes = (size_t)n * er_dtype_size(xt);
            void *dx = dev_bytes(xin, xbytes), *dgy = dev_bytes(gy, (size_t)n * 2);
            uint16_t *y = malloc(n * 2);
            float *mean = malloc(R * 4), *rstd = malloc(R * 4), *gw = calloc(C, 4), *gb = calloc(C, 4);
            void *gx = malloc(xbytes);
            memcpy(gx, xt == ER_BF16 ? (const void *)gx0 : (const void *)gx0f, xbytes);
            void *dy = GPU->alloc(n * 2), *dgx = dev_bytes(gx, xbytes);
            float *dmean = GPU->alloc(R * 4), *drstd = GPU->alloc(R * 4), *dgw = devf(gw, C), *dgb = devf(gb, C);
            CPU->layernorm(R, C, xt, xin, w, b, 1e-6f, ER_BF16, y, mean, rstd);
            GPU->layernorm(R, C, xt, dx, dw, db, 1e-6f, ER_BF16, dy, dmean, drstd);
            expect_bf16_close("layernorm y (bf16)", y, dy, n);
            expect_close("layernorm mean", mean, dmean, R, 1e-6);
            expect_close("layernorm rstd", rstd, drstd, R, 1e-5);
            float *cw = work_of(CPU, CPU->layernorm_backward_workspace(R, C));
            float *gw_ = work_of(GPU, GPU->layernorm_backward_workspace(R, C));
            CPU->layernorm_backward(R, C, xt, xin, w, mean, rstd, ER_BF16, gy, gx, gw, gb, cw);
            GPU->layernorm_backward(R, C, xt, dx, dw, dmean, drstd, ER_BF16, dgy, dgx, dgw, dgb, gw_);
            if (xt == ER_BF16) expect_bf16_close("layernorm gx (bf16, +=)", gx, dgx, n);
            else expect_close("layernorm gx (fp32 from a bf16 gy, +=)", gx, dgx, n, 1e-5);
            expect_close("layernorm gw", gw, dgw, C, 1e-4);
            expect_close("layernorm gb", gb, dgb, C, 1e-4);
            CPU->free(cw); GPU->free(gw_); GPU->free(dx); GPU->free(dgy); GPU->free(dy); GPU->free(dgx);
            GPU->free(dmean); GPU->free(drstd); GPU->free(dgw); GPU->free(dgb);
            free(y); free(mean); free(rstd); free(gw); free(gb); free(gx);
        }
        GPU->free(dw); GPU->free(db);
        free(xf); free(gyf); free(gx0f); free(w); free(b); free(x); free(gy); free(gx0);
    }
}

Test(cuda, bias_gelu_bf16_storage) {
    require_gpu();
    const int64_t sizes[3][2] = {{1, 5}, {67, 33}, {130, 1030}};
    for (int s = 0; s < 3; s++) {
        const int64_t R = sizes[s][0], C = sizes[s][1], n = R * C;
        float *xf = rnd(n, -4, 4, 600 + s), *gyf = rnd(n, -1, 1, 610 + s), *gx0f = rnd(n, -1, 1, 620 + s);
        float *b = rnd(C, -1, 1, 630 + s);
        uint16_t *x = bf16_of(xf, n), *gy = bf16_of(gyf, n), *y = malloc(n * 2);
        void *dx = dev_bytes(x, n * 2), *dgy = dev_bytes(gy, n * 2), *dy = GPU->alloc(n * 2);
        float *db = devf(b, C);
        CPU->bias_gelu(R, C, ER_BF16, x, b, y);
        GPU->bias_gelu(R, C, ER_BF16, dx, db, dy);
        expect_bf16_close("bias_gelu y (bf16)", y, dy, n);
        for (int acc = 0; acc <= 1; acc++) {
            uint16_t *gx = bf16_of(gx0f, n);
            float *gb = rnd(C, -1, 1, 640 + s), *dgb = devf(gb, C);
            void *dgx = dev_bytes(gx, n * 2);
            float *cw = work_of(CPU, CPU->bias_gelu_backward_workspace(R, C));
            float *gw = work_of(GPU, GPU->bias_gelu_backward_workspace(R, C));
            CPU->bias_gelu_backward(R, C, ER_BF16, x, b, gy, gx, gb, acc, cw);
            GPU->bias_gelu_backward(R, C, ER_BF16, dx, db, dgy, dgx, dgb, acc, gw);
            expect_bf16_close(acc ? "bias_gelu_backward gx (bf16, +=)" : "bias_gelu_backward gx (bf16)", gx, dgx, n);
            expect_close("bias_gelu_backward gb (from fp32 terms)", gb, dgb, C, 1e-4);
            CPU->free(cw); GPU->free(gw); GPU->free(dgx); GPU->free(dgb);
            free(gx); free(gb);
        }
        GPU->free(dx); GPU->free(dgy); GPU->free(dy); GPU->free(db);
        free(xf); free(gyf); free(gx0f); free(b); free(x); free(gy); free(y);
    }
}

/* The bias gradient: gb += column sums of g (fp32 or bf16, widened), summed in another order than
 * the CPU's (fp32 tolerance); g16, the fp32 g rounded to bf16 on the way, bit for bit the CPU's cast.
 * Shapes: odd columns (no paired loads), one chunk, many chunks (3200 rows: ViT-L's MAE encoder), and
 * g one element into its buffer (a view: even columns, but the pairs are not aligned). */
PARITY_COVERS(bias_grad_workspace);
PARITY_COVERS(bias_grad);
Test(cuda, bias_grad_sums_and_rounding) {
    require_gpu();
    const int64_t sizes[5][2] = {{1, 5}, {67, 33}, {130, 1030}, {3200, 64}, {9, 64}};
    for (int s = 0; s < 5; s++) {
        const int64_t R = sizes[s][0], C = sizes[s][1], n = R * C, off = s == 4; /* elements into the buffer */
        float *gf = rnd(n, -1, 1, 700 + s), *gb0 = rnd(C, -1, 1, 710 + s);
        uint16_t *g = bf16_of(gf, n);
        for (int dt = 0; dt < 2; dt++)
            for (int round = 0; round <= (dt == ER_F32); round++) {
                const void *gin = dt == ER_BF16 ? (const void *)g : (const void *)gf;
                const size_t es = er_dtype_size(dt);
                char *dbuf = GPU->alloc((size_t)(n + off) * es), *dg = dbuf + off * es;
                GPU->upload(dg, gin, (size_t)n * es);
                float *gb = malloc(C * 4), *dgb = devf(gb0, C);
                memcpy(gb, gb0, C * 4);
                uint16_t *g16 = round ? malloc(n * 2) : NULL;
                void *dg16 = round ? GPU->alloc(n * 2) : NULL;
                float *cw = work_of(CPU, CPU->bias_grad_workspace(R, C, dt));
                float *gw = work_of(GPU, GPU->bias_grad_workspace(R, C, dt));
                CPU->bias_grad(R, C, dt, gin, gb, g16, cw);
                GPU->bias_grad(R, C, dt, dg, dgb, dg16, gw);
                expect_close(dt == ER_BF16 ? "bias_grad gb (bf16 g)" : "bias_grad gb (fp32 g)", gb, dgb, C, 1e-5);
                if (round) {
                    uint16_t *h = malloc(n * 2);
                    GPU->download(h, dg16, (size_t)n * 2);
                    cr_assert(memcmp(h, g16, (size_t)n * 2) == 0, "bias_grad g16: the GPU's bf16 rounding is the CPU's");
                    cr_assert(memcmp(g16, g, (size_t)n * 2) == 0, "bias_grad g16 is g rounded to nearest even");
                    free(h);
                    /* the rounding alone (no bias) */
                    void *dz = GPU->alloc(n * 2);
                    GPU->bias_grad(R, C, dt, dg, NULL, dz, gw);
                    uint16_t *hz = malloc(n * 2);
                    GPU->download(hz, dz, (size_t)n * 2);
                    cr_assert(memcmp(hz, g16, (size_t)n * 2) == 0, "bias_grad without gb still rounds g");
                    free(hz);
                    GPU->free(dz);
                }
                CPU->free(cw); GPU->free(gw); GPU->free(dbuf); GPU->free(dgb);
                if (round) GPU->free(dg16);
                free(gb); free(g16);
            }
        free(gf); free(gb0); free(g);
    }
}

/* y = x + fc2(bias_gelu(fc1(layernorm_to_bf16(x)))) on `dev` from the same host values; returns y,
 * and dL/dx, dL/dW1, dL/dW2, dL/db1 (L = sum(y * r)) in out[0..3] (host, malloc'd). */
enum { MT = 6, MC = 32, MH = 64 };
static float *mlp_bf16(int dev, const float *xh, const float *w1h, const float *w2h, const float *b1h, const float *rh,
                       float *out[4]) {
    tensor *x = tensor_new_on(dev, 2, SHAPE(MT, MC)), *w1 = tensor_param_on(dev, "w1", 2, SHAPE(MH, MC));
    tensor *w2 = tensor_param_on(dev, "w2", 2, SHAPE(MC, MH)), *b1 = tensor_param_on(dev, "b1", 1, SHAPE(MH));
    tensor *r = tensor_new_on(dev, 2, SHAPE(MT, MC));
    tensor_copy_from_host(x, xh), tensor_copy_from_host(w1, w1h), tensor_copy_from_host(w2, w2h);
    tensor_copy_from_host(b1, b1h), tensor_copy_from_host(r, rh);
    tensor_set_requires_grad(x, 1);
    tensor *h = op_layernorm_to(x, NULL, NULL, 1e-6f, DT_BF16);
    tensor *y = op_linear_add(op_bias_gelu(op_linear(h, w1, NULL), b1), w2, NULL, x);
    cr_assert_not_null(y, "%s", er_msg());
    cr_assert_eq(y->dtype, DT_F32, "the residual stream stays fp32");
    float *yh = malloc(sizeof(float) * MT * MC);
    tensor_to_host(y, yh);
    cr_assert_eq(backward(op_sum_all(op_mul(y, r))), ER_OK, "%s", er_msg());
    tensor *g[4] = {x->grad, w1->grad, w2->grad, b1->grad};
    for (int i = 0; i < 4; i++) {
        out[i] = malloc(sizeof(float) * tensor_numel(g[i]));
        tensor_to_host(g[i], out[i]);
    }
    tensor_free(x), tensor_free(w1), tensor_free(w2), tensor_free(b1), tensor_free(r);
    nn_step_end();
    return yh;
}

Test(cuda, mlp_on_bf16_activations_matches_cpu) {
    require_gpu();
    float *x = rnd(MT * MC, -2, 2, 700), *w1 = rnd(MH * MC, -0.3f, 0.3f, 701), *w2 = rnd(MC * MH, -0.3f, 0.3f, 702);
    float *b1 = rnd(MH, -0.5f, 0.5f, 703), *r = rnd(MT * MC, -1, 1, 704), *gc[4], *gg[4];
    float *yc = mlp_bf16(DEV_CPU, x, w1, w2, b1, r, gc), *yg = mlp_bf16(GPU_DEV, x, w1, w2, b1, r, gg);
    gpu_ok("bf16 MLP");
    /* y is fp32 (the residual plus a product of bf16 values): a bf16 rounding flip upstream moves it
     * by at most a bf16 step of h (2^-7) times |W| sums; as the bf16 GEMM parity, 2e-2 of the scale */
    float *dy = devf(yc, MT * MC), *dgs[4];
    GPU->upload(dy, yg, sizeof(float) * MT * MC);
    expect_close("bf16 MLP y", yc, dy, MT * MC, 2e-2);
    const int64_t n[4] = {MT * MC, MH * MC, MC * MH, MH};
    const char *what[4] = {"bf16 MLP dL/dx", "bf16 MLP dL/dW1", "bf16 MLP dL/dW2", "bf16 MLP dL/db1"};
    for (int i = 0; i < 4; i++) {
        dgs[i] = devf(gg[i], n[i]);
        expect_close(what[i], gc[i], dgs[i], n[i], 2e-2);
        GPU->free(dgs[i]);
        free(gc[i]), free(gg[i]);
    }
    GPU->free(dy);
    free(x), free(w1), free(w2), free(b1), free(r), free(yc), free(yg);
}
