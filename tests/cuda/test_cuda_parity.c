/* test_cuda_parity.c — every entry of the CUDA op table against the CPU table (the reference) on
 * the same random inputs, plus a few training steps of a tiny transformer on both backends.
 *
 * Tolerances (|gpu - cpu| <= rtol * (|cpu| + max|cpu|), i.e. relative to the element and to the
 * tensor's scale):
 *   exact            fill, copies, gather, dropout masks, max/argmax, binary/affine ops
 *   1e-5             fp32 kernels (elementwise maths, reductions, norms, softmax, losses, GEMM,
 *                    attention): different summation orders, fp32 with double row statistics
 *   2e-2             GEMM in bf16 mode (8-bit mantissa inputs, fp32 accumulation)
 *   1e-4             losses of 3 SGD steps of a tiny transformer (errors compound over steps)
 *   1e-5 / 1e-3      a tiny ViT + MAE decoder + SSCD head built with vit_new_on & co.: the first
 *                    loss (same bits in, fp32 kernels) / the losses after AdamW steps with clipping
 *                    (AdamW divides by sqrt(v): near-zero gradients amplify summation-order noise)
 * Compiles in every build; skips with "no CUDA device: ..." when the build has no CUDA or the
 * machine has no GPU (CI, this repository's development machine). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoints/checkpoint.h"
#include "kernels/backend.h"
#include "nn/base/base.h"
#include "nn/models/mae.h"
#include "nn/ops.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "nn/base/rng.h"
#include "nn/losses/sscd.h"
#include "nn/models/vit.h"
#include "tests/test_util.h"
#include "kernels/gemm.h"
#include "tests/cuda/parity_util.h"

PARITY_COVERS(fill);
PARITY_COVERS(copy_strided);
PARITY_COVERS(sum_to_workspace);
PARITY_COVERS(sum_to);
Test(cuda, storage_fill_copy_strided_sum_to) {
    require_gpu();
    int64_t shape[3] = {5, 7, 33}, n = 5 * 7 * 33;
    float *x = rnd(n, -1, 1, 1), *y = rnd(n, -1, 1, 2);
    float *dx = devf(x, n), *dy = devf(y, n);
    /* device copy round trip */
    float *dz = GPU->alloc(n * sizeof(float));
    GPU->copy(dz, dx, n * sizeof(float));
    expect_close("copy", x, dz, n, 0);
    GPU->fill(dz, n, 0.25f);
    float *f = malloc(n * sizeof(float));
    CPU->fill(f, n, 0.25f);
    expect_close("fill", f, dz, n, 0);
    /* transpose-copy x[5,7,33] -> y viewed permuted (33,7,5), accumulate and not */
    int64_t vs[3] = {1, 33, 7 * 33}, vshape[3] = {33, 7, 5}, ys[3];
    contig(3, vshape, ys);
    for (int acc = 0; acc <= 1; acc++) {
        float *yc = copyf(y, n);
        GPU->upload(dy, y, n * sizeof(float));
        CPU->copy_strided(3, vshape, x, vs, yc, ys, acc);
        GPU->copy_strided(3, vshape, dx, vs, dy, ys, acc);
        expect_close(acc ? "copy_strided (+=)" : "copy_strided", yc, dy, n, 0);
        free(yc);
    }
    /* sum_to: [5,7,33] -> [1,7,1], [5,1,33], [1,1,1], and the column-sum cases [1,7,33], [1,1,33] */
    int64_t ys1[3] = {1, 7, 1}, ys2[3] = {5, 1, 33}, ys3[3] = {1, 1, 1}, ys4[3] = {1, 7, 33}, ys5[3] = {1, 1, 33};
    const int64_t *targets[5] = {ys1, ys2, ys3, ys4, ys5};
    for (int t = 0; t < 5; t++) {
        int64_t m = targets[t][0] * targets[t][1] * targets[t][2];
        float *yc = rnd(m, -1, 1, 3), *dyt = devf(yc, m);
        float *wc = work_of(CPU, CPU->sum_to_workspace(3, shape, targets[t]));
        float *wg = work_of(GPU, GPU->sum_to_workspace(3, shape, targets[t]));
        CPU->sum_to(3, shape, x, targets[t], yc, 1, wc);
        GPU->sum_to(3, shape, dx, targets[t], dyt, 1, wg);
        expect_close("sum_to", yc, dyt, m, 1e-5);
        free(yc);
        GPU->free(dyt);
        CPU->free(wc);
        GPU->free(wg);
    }
    /* a large box to a scalar (the block-reduction path) */
    int64_t bigshape[1] = {100000}, one[1] = {1};
    float *big = rnd(100000, -1, 1, 4), *dbig = devf(big, 100000), s_cpu = 0, *ds = devf(&s_cpu, 1);
    float *wc = work_of(CPU, CPU->sum_to_workspace(1, bigshape, one));
    float *wg = work_of(GPU, GPU->sum_to_workspace(1, bigshape, one));
    CPU->sum_to(1, bigshape, big, one, &s_cpu, 0, wc);
    GPU->sum_to(1, bigshape, dbig, one, ds, 0, wg);
    CPU->free(wc);
    GPU->free(wg);
    expect_close("sum_to scalar", &s_cpu, ds, 1, 1e-5);
    GPU->free(dx); GPU->free(dy); GPU->free(dz); GPU->free(dbig); GPU->free(ds);
    free(x); free(y); free(f); free(big);
}

PARITY_COVERS(binary);
PARITY_COVERS(binary_grad);
Test(cuda, binary_and_grad_with_broadcast) {
    require_gpu();
    int64_t shape[3] = {4, 6, 37}, n = 4 * 6 * 37;
    int64_t as[3] = {6 * 37, 37, 1}, bs[3] = {0, 1, 0}; /* b is [1, 6, 1] broadcast */
    float *a = rnd(n, -2, 2, 10), *b = rnd(6, 0.5f, 2, 11);
    float *da = devf(a, n), *db = devf(b, 6), *dy = GPU->alloc(n * sizeof(float));
    float *gy = rnd(n, -1, 1, 12), *dgy = devf(gy, n), *y = malloc(n * sizeof(float));
    for (int op = 0; op < BIN_COUNT; op++) {
        CPU->binary(op, 3, shape, a, as, b, bs, y);
        GPU->binary(op, 3, shape, da, as, db, bs, dy);
        expect_close("binary", y, dy, n, 0);
        for (int side = 0; side <= 1; side++) {
            float *g = rnd(n, -1, 1, 13), *dg = devf(g, n);
            CPU->binary_grad(op, side, 3, shape, a, as, b, bs, gy, g, 1);
            GPU->binary_grad(op, side, 3, shape, da, as, db, bs, dgy, dg, 1);
            expect_close("binary_grad", g, dg, n, 1e-6);
            free(g);
            GPU->free(dg);
        }
    }
    GPU->free(da); GPU->free(db); GPU->free(dy); GPU->free(dgy);
    free(a); free(b); free(gy); free(y);
}

PARITY_COVERS(unary);
PARITY_COVERS(unary_backward);
Test(cuda, unary_forward_backward) {
    require_gpu();
    int64_t n = 10007;
    for (int op = 0; op < UN_COUNT; op++) {
        int positive = op == UN_LOG || op == UN_SQRT || op == UN_POW;
        float *x = rnd(n, positive ? 0.1f : -3, 3, 20 + op), *gy = rnd(n, -1, 1, 40 + op);
        float alpha = op == UN_POW ? 1.7f : (op == UN_CLAMP ? -0.5f : 0.8f), beta = op == UN_CLAMP ? 1.2f : 0.3f;
        float *y = malloc(n * sizeof(float)), *gx = rnd(n, -1, 1, 60 + op);
        float *dx = devf(x, n), *dy = GPU->alloc(n * sizeof(float)), *dgy = devf(gy, n), *dgx = devf(gx, n);
        CPU->unary(op, n, x, y, alpha, beta);
        GPU->unary(op, n, dx, dy, alpha, beta);
        expect_close("unary", y, dy, n, 1e-6);
        CPU->unary_backward(op, n, x, y, gy, gx, alpha, beta, 1);
        GPU->unary_backward(op, n, dx, dy, dgy, dgx, alpha, beta, 1);
        expect_close("unary_backward", gx, dgx, n, 1e-5);
        for (int64_t i = 0; i < n; i++) gx[i] = NAN; /* accumulate 0: written, never read */
        GPU->upload(dgx, gx, n * sizeof(float));
        CPU->unary_backward(op, n, x, y, gy, gx, alpha, beta, 0);
        GPU->unary_backward(op, n, dx, dy, dgy, dgx, alpha, beta, 0);
        expect_all_written("unary_backward (accumulate 0)", gx, n);
        expect_close("unary_backward written (accumulate 0)", gx, dgx, n, 1e-5);
        if (op == UN_RELU) { /* in place, as op_add_relu runs them: y over x, then gx over gy */
            GPU->unary(op, n, dx, dx, alpha, beta);
            expect_close("unary in place", y, dx, n, 1e-6);
            GPU->unary_backward(op, n, dy, dy, dgy, dgy, alpha, beta, 0);
            expect_close("unary_backward in place", gx, dgy, n, 1e-5);
        }
        GPU->free(dx); GPU->free(dy); GPU->free(dgy); GPU->free(dgx);
        free(x); free(gy); free(y); free(gx);
    }
}

PARITY_COVERS(bias_gelu);
PARITY_COVERS(bias_gelu_backward_workspace);
PARITY_COVERS(bias_gelu_backward);
Test(cuda, bias_gelu_forward_backward) {
    require_gpu();
    const int64_t sizes[3][2] = {{1, 5}, {67, 33}, {130, 1030}};
    for (int s = 0; s < 3; s++) {
        int64_t R = sizes[s][0], C = sizes[s][1], n = R * C;
        float *x = rnd(n, -4, 4, 300 + s), *b = rnd(C, -1, 1, 310 + s), *gy = rnd(n, -1, 1, 320 + s);
        float *dx = devf(x, n), *db = devf(b, C), *dgy = devf(gy, n), *y = malloc(n * sizeof(float));
        float *dy = GPU->alloc(n * sizeof(float));
        CPU->bias_gelu(R, C, ER_F32, x, b, y);
        GPU->bias_gelu(R, C, ER_F32, dx, db, dy);
        expect_close("bias_gelu", y, dy, n, 1e-6);
        for (int acc = 0; acc <= 1; acc++) {
            float *gx = rnd(n, -1, 1, 330 + s), *gb = rnd(C, -1, 1, 340 + s), *dgx = devf(gx, n), *dgb = devf(gb, C);
            float *cw = work_of(CPU, CPU->bias_gelu_backward_workspace(R, C));
            float *gw = work_of(GPU, GPU->bias_gelu_backward_workspace(R, C));
            CPU->bias_gelu_backward(R, C, ER_F32, x, b, gy, gx, gb, acc, cw);
            GPU->bias_gelu_backward(R, C, ER_F32, dx, db, dgy, dgx, dgb, acc, gw);
            expect_close(acc ? "bias_gelu_backward gx (+=)" : "bias_gelu_backward gx", gx, dgx, n, 1e-5);
            expect_close("bias_gelu_backward gb", gb, dgb, C, 1e-4);
            CPU->free(cw); GPU->free(gw); GPU->free(dgx); GPU->free(dgb);
            free(gx); free(gb);
        }
        GPU->free(dx); GPU->free(db); GPU->free(dgy); GPU->free(dy);
        free(x); free(b); free(gy); free(y);
    }
}

PARITY_COVERS(dropout);
Test(cuda, dropout_mask_is_identical) {
    require_gpu();
    int64_t n = 4099;
    float *x = rnd(n, -1, 1, 80), *y = rnd(n, -1, 1, 81);
    float *dx = devf(x, n), *dy = devf(y, n);
    const uint64_t offsets[3] = {0, 3, 1000001};
    for (int t = 0; t < 3; t++)
        for (int acc = 0; acc <= 1; acc++) {
            CPU->dropout(n, x, y, 0.3f, 42, rng_stream(RNG_DROPOUT, 7, t), offsets[t], acc);
            GPU->dropout(n, dx, dy, 0.3f, 42, rng_stream(RNG_DROPOUT, 7, t), offsets[t], acc);
            expect_close("dropout", y, dy, n, 0);
        }
    GPU->free(dx); GPU->free(dy);
    free(x); free(y);
}

PARITY_COVERS(reduce);
PARITY_COVERS(reduce_backward);
Test(cuda, reduce_and_backward) {
    require_gpu();
    const int64_t cases[3][3] = {{13, 1000, 1}, {7, 50, 65}, {1, 5, 3}};
    for (int c = 0; c < 3; c++) {
        int64_t o = cases[c][0], l = cases[c][1], in = cases[c][2], n = o * l * in, m = o * in;
        float *x = rnd(n, -5, 5, 90 + c), *gy = rnd(m, -1, 1, 95 + c);
        float *dx = devf(x, n), *dgy = devf(gy, m);
        for (int op = 0; op < RED_COUNT; op++) {
            float *y = malloc(m * sizeof(float)), *dy = GPU->alloc(m * sizeof(float));
            int32_t *am = malloc(m * sizeof(int32_t)), *dam = GPU->alloc(m * sizeof(int32_t));
            CPU->reduce(op, o, l, in, x, y, op == RED_MAX ? am : NULL);
            GPU->reduce(op, o, l, in, dx, dy, op == RED_MAX ? dam : NULL);
            expect_close("reduce", y, dy, m, op == RED_MAX ? 0 : 1e-6);
            if (op == RED_MAX) expect_same_i32("argmax", am, dam, m);
            float *gx = rnd(n, -1, 1, 99), *dgx = devf(gx, n);
            CPU->reduce_backward(op, o, l, in, gy, am, gx);
            GPU->reduce_backward(op, o, l, in, dgy, dam, dgx);
            expect_close("reduce_backward", gx, dgx, n, 1e-6);
            free(y); free(am); free(gx);
            GPU->free(dy); GPU->free(dam); GPU->free(dgx);
        }
        GPU->free(dx); GPU->free(dgy);
        free(x); free(gy);
    }
}

/* Row-major products with every transpose combination, batched with strides, beta 0 and 1. */
/* The CPU reference always in fp32; the device in the precision under test. */
static void gemm_case(int bf16, double rtol) {
    const int m = 37, n = 45, k = 67, batch = 3;
    for (int ta = 0; ta <= 1; ta++)
        for (int tb = 0; tb <= 1; tb++)
            for (int beta_i = 0; beta_i <= 1; beta_i++) {
                int lda = ta ? m + 3 : k + 1, ldb = tb ? k + 2 : n, ldc = n + 5;
                long sA = (long)(ta ? k : m) * lda, sB = (long)(tb ? n : k) * ldb, sC = (long)m * ldc;
                float *A = rnd(sA * batch, -1, 1, 100), *B = rnd(sB * batch, -1, 1, 101);
                float *C = rnd(sC * batch, -1, 1, 102);
                float *dA = devf(A, sA * batch), *dB = devf(B, sB * batch), *dC = devf(C, sC * batch);
                float beta = beta_i ? 1.0f : 0.0f;
                CPU->gemm_batched(GEMM_COMPUTE_FP32, ta, tb, m, n, k, 0.7f, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
                GPU->gemm_batched(bf16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32, ta, tb, m, n, k, 0.7f, dA, lda, sA,
                                  dB, ldb, sB, beta, dC, ldc, sC, batch);
                expect_close(bf16 ? "gemm bf16" : "gemm fp32", C, dC, sC * batch, rtol);
                GPU->free(dA); GPU->free(dB); GPU->free(dC);
                free(A); free(B); free(C);
            }
}

PARITY_COVERS(gemm_batched);
Test(cuda, gemm_fp32) {
    require_gpu();
    gemm_case(0, 1e-5);
}

Test(cuda, gemm_bf16) {
    require_gpu();
    gemm_case(1, 2e-2);
}

/* A weight packed once (the CPU's panels; CUDA keeps none) as op(B) of a product, both transposes
 * of B and A, beta 0 and 1, in fp32. */
PARITY_COVERS(gemm_prepack);
PARITY_COVERS(gemm_prepack_free);
PARITY_COVERS(gemm_prepacked);
Test(cuda, gemm_prepacked_fp32) {
    require_gpu();
    const int m = 29, n = 70, k = 41;
    for (int t = 0; t < 4; t++) {
        int ta = t >> 1, tb = t & 1, lda = ta ? m + 1 : k + 3, ldb = tb ? k + 2 : n + 1, ldc = n + 4;
        long nA = (long)(ta ? k : m) * lda, nB = (long)(tb ? n : k) * ldb, nC = (long)m * ldc;
        float *A = rnd(nA, -1, 1, 120), *B = rnd(nB, -1, 1, 121), *C = rnd(nC, -1, 1, 122);
        float *dA = devf(A, nA), *dB = devf(B, nB), *dC = devf(C, nC);
        void *pc = NULL, *pg = (void *)1;
        CPU->gemm_prepack(GEMM_COMPUTE_FP32, tb, k, n, B, ldb, &pc);
        GPU->gemm_prepack(GEMM_COMPUTE_FP32, tb, k, n, dB, ldb, &pg);
        cr_assert_not_null(pc, "the CPU keeps packed panels");
        for (int beta_i = 0; beta_i <= 1; beta_i++) {
            CPU->gemm_prepacked(GEMM_COMPUTE_FP32, ta, tb, m, n, k, 0.7f, A, lda, B, ldb, pc, (float)beta_i, C, ldc);
            GPU->gemm_prepacked(GEMM_COMPUTE_FP32, ta, tb, m, n, k, 0.7f, dA, lda, dB, ldb, pg, (float)beta_i, dC, ldc);
            expect_close("gemm_prepacked", C, dC, nC, 1e-5);
        }
        CPU->gemm_prepack_free(pc);
        GPU->gemm_prepack_free(pg);
        GPU->free(dA); GPU->free(dB); GPU->free(dC);
        free(A); free(B); free(C);
    }
}

PARITY_COVERS(layernorm);
PARITY_COVERS(layernorm_backward_workspace);
PARITY_COVERS(layernorm_backward);
PARITY_COVERS(softmax);
PARITY_COVERS(softmax_backward);
PARITY_COVERS(l2norm);
PARITY_COVERS(l2norm_backward);
PARITY_COVERS(cross_entropy);
PARITY_COVERS(cross_entropy_backward);
Test(cuda, layernorm_softmax_l2norm_cross_entropy) {
    require_gpu();
    const int64_t R = 37, C = 300, n = R * C;
    float *x = rnd(n, -3, 3, 110), *w = rnd(C, 0.5f, 1.5f, 111), *b = rnd(C, -1, 1, 112);
    float *gy = rnd(n, -1, 1, 113);
    float *dx = devf(x, n), *dw = devf(w, C), *db = devf(b, C), *dgy = devf(gy, n);
    float *y = malloc(n * sizeof(float)), *mean = malloc(R * sizeof(float)), *rstd = malloc(R * sizeof(float));
    float *dy = GPU->alloc(n * sizeof(float)), *dmean = GPU->alloc(R * 4), *drstd = GPU->alloc(R * 4);
    CPU->layernorm(R, C, ER_F32, x, w, b, 1e-6f, ER_F32, y, mean, rstd);
    GPU->layernorm(R, C, ER_F32, dx, dw, db, 1e-6f, ER_F32, dy, dmean, drstd);
    expect_close("layernorm y", y, dy, n, 1e-5);
    expect_close("layernorm mean", mean, dmean, R, 1e-5);
    expect_close("layernorm rstd", rstd, drstd, R, 1e-5);
    float *gx = rnd(n, -1, 1, 114), *gw = rnd(C, -1, 1, 115), *gb = rnd(C, -1, 1, 116);
    float *dgx = devf(gx, n), *dgw = devf(gw, C), *dgb = devf(gb, C);
    float *wc = work_of(CPU, CPU->layernorm_backward_workspace(R, C));
    float *wg = work_of(GPU, GPU->layernorm_backward_workspace(R, C));
    CPU->layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, gx, gw, gb, wc);
    GPU->layernorm_backward(R, C, ER_F32, dx, dw, dmean, drstd, ER_F32, dgy, dgx, dgw, dgb, wg);
    CPU->free(wc);
    GPU->free(wg);
    expect_close("layernorm gx", gx, dgx, n, 1e-5);
    expect_close("layernorm gw", gw, dgw, C, 1e-5);
    expect_close("layernorm gb", gb, dgb, C, 1e-5);

    for (int lg = 0; lg <= 1; lg++) {
        CPU->softmax(R, C, x, y, lg);
        GPU->softmax(R, C, dx, dy, lg);
        expect_close("softmax", y, dy, n, 1e-5);
        GPU->upload(dgx, gx, n * 4);
        CPU->softmax_backward(R, C, y, gy, gx, lg);
        GPU->softmax_backward(R, C, dy, dgy, dgx, lg);
        expect_close("softmax_backward", gx, dgx, n, 1e-5);
    }

    float *nrm = malloc(R * 4), *dnrm = GPU->alloc(R * 4);
    CPU->l2norm(R, C, x, y, nrm, 1e-12f);
    GPU->l2norm(R, C, dx, dy, dnrm, 1e-12f);
    expect_close("l2norm y", y, dy, n, 1e-5);
    expect_close("l2norm norm", nrm, dnrm, R, 1e-5);
    GPU->upload(dgx, gx, n * 4);
    CPU->l2norm_backward(R, C, y, nrm, gy, gx, 1e-12f);
    GPU->l2norm_backward(R, C, dy, dnrm, dgy, dgx, 1e-12f);
    expect_close("l2norm_backward", gx, dgx, n, 1e-5);

    int32_t lab[37];
    for (int r = 0; r < R; r++) lab[r] = r % 5 == 4 ? -1 : (r * 17) % C;
    int32_t *dlab = dev_from(lab, sizeof lab);
    float *loss = malloc(R * 4), *lse = malloc(R * 4), *dloss = GPU->alloc(R * 4), *dlse = GPU->alloc(R * 4);
    CPU->cross_entropy(R, C, x, lab, loss, lse);
    GPU->cross_entropy(R, C, dx, dlab, dloss, dlse);
    expect_close("cross_entropy loss", loss, dloss, R, 1e-5);
    expect_close("cross_entropy lse", lse, dlse, R, 1e-5);
    GPU->upload(dgx, gx, n * 4);
    const float ce_gy = 1.5f; /* the loss gradient, read by the kernel: scale 1.5 / 6 = 0.25 */
    float *dce_gy = devf(&ce_gy, 1);
    CPU->cross_entropy_backward(R, C, x, lab, lse, &ce_gy, 6.0f, gx);
    GPU->cross_entropy_backward(R, C, dx, dlab, dlse, dce_gy, 6.0f, dgx);
    GPU->free(dce_gy);
    expect_close("cross_entropy_backward", gx, dgx, n, 1e-5);

    GPU->free(dx); GPU->free(dw); GPU->free(db); GPU->free(dgy); GPU->free(dy); GPU->free(dmean);
    GPU->free(drstd); GPU->free(dgx); GPU->free(dgw); GPU->free(dgb); GPU->free(dnrm); GPU->free(dlab);
    GPU->free(dloss); GPU->free(dlse);
    free(x); free(w); free(b); free(gy); free(y); free(mean); free(rstd); free(gx); free(gw); free(gb);
    free(nrm); free(loss); free(lse);
}

/* Many rows: the weight / bias gradients are summed in row chunks, then chunk by chunk; rows of up to
 * 1024 take the warp-per-row forward, wider rows (5 x 4100) the block-per-row one. */
Test(cuda, layernorm_backward_many_rows) {
    require_gpu();
    const int64_t shapes[2][2] = {{3001, 70}, {5, 4100}};
    for (int sh = 0; sh < 2; sh++) {
        const int64_t R = shapes[sh][0], C = shapes[sh][1], n = R * C;
        float *x = rnd(n, -3, 3, 140 + 10 * sh), *w = rnd(C, 0.5f, 1.5f, 141), *b = rnd(C, -1, 1, 142);
        float *gy = rnd(n, -1, 1, 143);
        float *gx = rnd(n, -1, 1, 144), *gw = rnd(C, -1, 1, 145), *gb = rnd(C, -1, 1, 146);
        float *dx = devf(x, n), *dw = devf(w, C), *db = devf(b, C), *dgy = devf(gy, n);
        float *dgx = devf(gx, n), *dgw = devf(gw, C), *dgb = devf(gb, C);
        float *y = malloc(n * 4), *mean = malloc(R * 4), *rstd = malloc(R * 4);
        float *dy = GPU->alloc(n * 4), *dmean = GPU->alloc(R * 4), *drstd = GPU->alloc(R * 4);
        CPU->layernorm(R, C, ER_F32, x, w, b, 1e-6f, ER_F32, y, mean, rstd);
        GPU->layernorm(R, C, ER_F32, dx, dw, db, 1e-6f, ER_F32, dy, dmean, drstd);
        expect_close("layernorm y", y, dy, n, 1e-5);
        expect_close("layernorm mean", mean, dmean, R, 1e-5);
        expect_close("layernorm rstd", rstd, drstd, R, 1e-5);
        float *wc = work_of(CPU, CPU->layernorm_backward_workspace(R, C));
        float *wg = work_of(GPU, GPU->layernorm_backward_workspace(R, C));
        CPU->layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, gx, gw, gb, wc);
        GPU->layernorm_backward(R, C, ER_F32, dx, dw, dmean, drstd, ER_F32, dgy, dgx, dgw, dgb, wg);
        expect_close("layernorm gx", gx, dgx, n, 1e-5);
        expect_close("layernorm gw", gw, dgw, C, 1e-5);
        expect_close("layernorm gb", gb, dgb, C, 1e-5);
        GPU->layernorm_backward(R, C, ER_F32, dx, dw, dmean, drstd, ER_F32, dgy, NULL, NULL, dgb, wg); /* gb alone */
        CPU->layernorm_backward(R, C, ER_F32, x, w, mean, rstd, ER_F32, gy, NULL, NULL, gb, wc);
        expect_close("layernorm gb alone", gb, dgb, C, 1e-5);
        gpu_ok("layernorm_backward many rows");
        CPU->free(wc); GPU->free(wg);
        GPU->free(dx); GPU->free(dw); GPU->free(db); GPU->free(dgy); GPU->free(dgx); GPU->free(dgw); GPU->free(dgb);
        GPU->free(dy); GPU->free(dmean); GPU->free(drstd);
        free(x); free(w); free(b); free(gy); free(gx); free(gw); free(gb); free(y); free(mean); free(rstd);
    }
}

PARITY_COVERS(gather);
PARITY_COVERS(scatter_add);
Test(cuda, gather_scatter_add) {
    require_gpu();
    const int64_t O = 3, L = 20, I = 17, K = 9;
    float *x = rnd(O * L * I, -1, 1, 120), *y = malloc(O * K * I * 4);
    int32_t idx[27];
    for (int i = 0; i < 27; i++) idx[i] = (i * 7 + 3) % 20; /* repeats across o, distinct within */
    int32_t *didx = dev_from(idx, sizeof idx);
    float *dx = devf(x, O * L * I), *dy = GPU->alloc(O * K * I * 4);
    for (int per_outer = 0; per_outer <= 1; per_outer++) {
        int64_t st = per_outer ? K : 0;
        CPU->gather(O, L, I, x, idx, st, K, y);
        GPU->gather(O, L, I, dx, didx, st, K, dy);
        expect_close("gather", y, dy, O * K * I, 0);
        float *acc = rnd(O * L * I, -1, 1, 121), *dacc = devf(acc, O * L * I);
        CPU->scatter_add(O, K, I, y, idx, st, L, acc);
        GPU->scatter_add(O, K, I, dy, didx, st, L, dacc);
        expect_close("scatter_add", acc, dacc, O * L * I, 1e-6);
        free(acc);
        GPU->free(dacc);
    }
    GPU->free(didx); GPU->free(dx); GPU->free(dy);
    free(x); free(y);
}


PARITY_COVERS(sumsq_many);
/* Per-array sums of squares in one call: 1030 arrays (more than one chunk of 1024), empty ones
 * among them, against the CPU's, and each array's value equal to a call with that array alone. */
Test(cuda, sumsq_many_matches_one_by_one) {
    require_gpu();
    enum { NA = 1030 };
    static const float *xs[NA], *dxs[NA];
    static int64_t ns[NA];
    static double c1[NA], g1[NA];
    float *pool = rnd(300000, -2, 2, 150), *dpool = devf(pool, 300000);
    int64_t off = 0;
    for (int i = 0; i < NA; i++) {
        ns[i] = i % 97 == 0 ? 0 : i == 5 ? 100000 : (i * 37) % 251 + 1; /* empty, one large, many small */
        if (off + ns[i] > 300000) off = 0;
        xs[i] = pool + off;
        dxs[i] = dpool + off;
        off += ns[i];
    }
    CPU->sumsq_many(NA, xs, ns, c1);
    GPU->sumsq_many(NA, dxs, ns, g1);
    gpu_ok("sumsq_many");
    for (int i = 0; i < NA; i++) {
        cr_assert(fabs(g1[i] - c1[i]) <= 1e-9 * (c1[i] > 1 ? c1[i] : 1), "array %d (n %lld): cpu %.12g cuda %.12g", i,
                  (long long)ns[i], c1[i], g1[i]);
        if (i % 101 == 5) {
            double one;
            CPU->sumsq_many(1, &xs[i], &ns[i], &one);
            cr_assert(one == c1[i], "array %d: alone %.17g, among others %.17g", i, one, c1[i]);
        }
    }
    GPU->free(dpool);
    free(pool);
}

PARITY_COVERS(scale);
PARITY_COVERS(all_finite);
/* Fused AdamW / SGD on one long tensor (a list of one), gradient norm pieces on the GPU against the
 * CPU table (kernels/cpu/optim.c). */
Test(cuda, fused_optimizer_steps) {
    require_gpu();
    const int64_t n = 5000;
    float *p = rnd(n, -1, 1, 140), *g = rnd(n, -1, 1, 141), *m = rnd(n, -0.1f, 0.1f, 142);
    float *v = rnd(n, 0, 0.01f, 143);
    float *dp = devf(p, n), *dg = devf(g, n), *dm = devf(m, n), *dv = devf(v, n);
    adamw_args a = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.05f, .gscale = 0.5f};
    /* with the bf16 copy written in the same pass (optim_config.bf16_weights): equal bits */
    uint16_t *p16 = calloc((size_t)n, 2), *dp16 = GPU->alloc((size_t)n * 2), *h16 = malloc((size_t)n * 2);
    for (int t = 1; t <= 3; t++) {
        adamw_scalars(&a, t);
        CPU->adamw_many(1, &p, (const float *const *)&g, &m, &v, &n, &a, &p16, NULL);
        GPU->adamw_many(1, &dp, (const float *const *)&dg, &dm, &dv, &n, &a, &dp16, NULL);
    }
    GPU->download(h16, dp16, (size_t)n * 2);
    gpu_ok("adamw_many with bf16 copies");
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(p16[i], er_f32_to_bf16(p[i]), "cpu p16[%lld] is not p rounded", (long long)i);
        cr_assert_eq(h16[i], p16[i], "adamw p16[%lld]: cuda 0x%04x, cpu 0x%04x", (long long)i, h16[i], p16[i]);
    }
    free(p16), free(h16);
    GPU->free(dp16);
    expect_close("adamw p", p, dp, n, 1e-6);
    expect_close("adamw m", m, dm, n, 1e-6);
    expect_close("adamw v", v, dv, n, 1e-6);
    for (int nesterov = 0; nesterov <= 1; nesterov++) {
        float *buf = rnd(n, -0.1f, 0.1f, 144), *dbuf = devf(buf, n);
        sgd_args sa = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f, .gscale = 1.0f, .nesterov = nesterov};
        for (int t = 0; t < 2; t++) {
            sa.first = t == 0;
            CPU->sgd_many(1, &p, (const float *const *)&g, &buf, &n, &sa, NULL, NULL);
            GPU->sgd_many(1, &dp, (const float *const *)&dg, &dbuf, &n, &sa, NULL, NULL);
        }
        expect_close("sgd p", p, dp, n, 1e-6);
        expect_close("sgd buf", buf, dbuf, n, 1e-6);
        free(buf);
        GPU->free(dbuf);
    }
    GPU->scale(dg, n, 0.5f);
    CPU->scale(g, n, 0.5f);
    expect_close("scale", g, dg, n, 0);
    cr_assert_eq(GPU->all_finite(dg, n), 1);
    float bad = NAN;
    GPU->upload(dg + 17, &bad, sizeof bad);
    cr_assert_eq(GPU->all_finite(dg, n), 0, "a NaN must be reported");
    GPU->free(dp); GPU->free(dg); GPU->free(dm); GPU->free(dv);
    free(p); free(g); free(m); free(v);
}

/* ---- a tiny transformer block trained for 3 SGD steps on each backend ---- */
#define TB 2
#define TT 9
#define TC 16
#define TH 2
#define TNC 5
enum { P_LNW, P_LNB, P_QKVW, P_QKVB, P_PROJW, P_PROJB, P_HEADW, P_HEADB, P_COUNT };
static const int64_t pshape[P_COUNT][2] = {{TC, 0}, {TC, 0}, {3 * TC, TC}, {3 * TC, 0}, {TC, TC}, {TC, 0},
                                           {TNC, TC}, {TNC, 0}};

static float tiny_step(int dev, tensor **P, const float *xin, const int32_t *labels) {
    tensor *x = tensor_empty(dev, 3, SHAPE(TB, TT, TC));
    tensor_copy_from_host(x, xin);
    tensor *h = op_layernorm(x, P[P_LNW], P[P_LNB], 1e-6f);
    tensor *qkv = op_linear(h, P[P_QKVW], P[P_QKVB]);                      /* [B, T, 3C] */
    qkv = op_reshape(qkv, 5, SHAPE(TB, TT, 3, TH, TC / TH));
    qkv = op_permute(qkv, (const int[]){2, 0, 3, 1, 4});                   /* [3, B, H, T, D] views */
    tensor *parts[3];
    cr_assert_eq(op_split(qkv, 0, 3, SHAPE(1, 1, 1), parts), ER_OK, "%s", er_msg());
    tensor *q = op_squeeze(parts[0], 0), *k = op_squeeze(parts[1], 0), *v = op_squeeze(parts[2], 0);
    tensor *a = op_attention(q, k, v, NULL, MASK_NONE, 0.0f);                /* [B, H, T, D] */
    a = op_reshape(op_contiguous(op_transpose(a, 1, 2)), 3, SHAPE(TB, TT, TC));
    tensor *y = op_add(x, op_linear(op_gelu(a), P[P_PROJW], P[P_PROJB]));
    tensor *pooled = op_mean(y, 1, 0);                                     /* [B, C] */
    tensor *logits = op_linear(pooled, P[P_HEADW], P[P_HEADB]);
    tensor *loss = op_cross_entropy(logits, labels);
    cr_assert_not_null(loss, "tiny model forward on %s: %s", dev ? "cuda" : "cpu", er_msg());
    float lv = tensor_item(loss);
    cr_assert_eq(backward(loss), ER_OK, "%s", er_msg());
    /* plain SGD on the host copy (the same float arithmetic for both backends) */
    for (int i = 0; i < P_COUNT; i++) {
        int64_t n = tensor_numel(P[i]);
        float *w = malloc(n * 4), *g = malloc(n * 4);
        tensor_to_host(P[i], w);
        tensor_to_host(P[i]->grad, g);
        for (int64_t j = 0; j < n; j++) w[j] -= 0.5f * g[j];
        tensor_copy_from_host(P[i], w);
        free(w);
        free(g);
    }
    param_list pl = {P, P_COUNT, P_COUNT};
    zero_grad(&pl);
    nn_step_end();
    return lv;
}

Test(cuda, tiny_transformer_training_matches_cpu) {
    require_gpu();
    tensor *P[2][P_COUNT];
    for (int i = 0; i < P_COUNT; i++) {
        int nd = pshape[i][1] ? 2 : 1;
        int64_t n = pshape[i][0] * (nd == 2 ? pshape[i][1] : 1);
        float *init = rnd(n, -0.4f, 0.4f, 200 + i);
        if (i == P_LNW)
            for (int64_t j = 0; j < n; j++) init[j] += 1.0f;
        for (int d = 0; d < 2; d++) {
            P[d][i] = tensor_param_on(d ? GPU_DEV : DEV_CPU, "p", nd, pshape[i]);
            cr_assert_not_null(P[d][i]);
            tensor_copy_from_host(P[d][i], init);
        }
        free(init);
    }
    float *x = rnd(TB * TT * TC, -1, 1, 220);
    int32_t labels[TB] = {1, 3};
    for (int step = 0; step < 3; step++) {
        float lc = tiny_step(DEV_CPU, P[0], x, labels);
        float lg = tiny_step(GPU_DEV, P[1], x, labels);
        gpu_ok("tiny transformer step");
        cr_assert(fabsf(lc - lg) <= 1e-4f * fabsf(lc), "step %d: cpu loss %.7g, cuda loss %.7g", step, lc, lg);
        if (step == 2) cr_log_info("tiny transformer losses after 3 steps: cpu %.7g cuda %.7g", lc, lg);
    }
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < P_COUNT; i++) tensor_free(P[d][i]);
    free(x);
}

#include "tests/cuda/parity_vit_model.h"

/* One training step as train/objective_image.c does it; returns the loss and the grad norm. */
static float model_step(model_on *m, int64_t step, const float *x, double *gnorm, int prec) {
    const int L = (MIMG / MP) * (MIMG / MP), K = L / 2;
    int32_t shuffle[MB * 16], restore[MB * 16], keep[MB * 16];
    float mask[MB * 16];
    mae_masking(MB, L, K, NULL, NULL, 5, (uint64_t)step, shuffle, restore, mask);
    for (int b = 0; b < MB; b++) memcpy(keep + b * K, shuffle + b * L, K * sizeof(int32_t));
    int dev = m->enc->patch_w->device;
    nn_ctx ctx = nn_ctx_train(5, step, 0, prec);
    tensor *xt = tensor_upload(dev, 4, SHAPE(MB, 3, MIMG, MIMG), x);
    tensor *latent = vit_forward_t(m->enc, &ctx, xt, keep, K);
    tensor *pred = mae_decoder_forward(&m->dec, &ctx, latent, 0, restore);
    tensor *lm = mae_loss_t(pred, mae_target_t(xt, MP, 1), mask);
    tensor *cls = op_reshape(op_slice(latent, 1, 0, 1), 2, SHAPE(MB, 32));
    int ids[MB] = {0, 1, 0, 1};
    uint8_t match[MB * MB];
    sscd_match_from_ids(ids, MB, match);
    sscd_stats st;
    tensor *lc = sscd_loss(sscd_descriptor(&m->head, &ctx, cls), match, 0.05, 5, 0, &st);
    tensor *loss = op_add(op_mul_scalar(lm, 0.5f), lc);
    /* max norm 0.5, small: clipping is active */
    return parity_train_step(loss, m->opt, 0.5, gnorm, dev ? "model step on cuda" : "model step on cpu");
}

static float *params_host(const param_list *pl, int64_t *n) {
    *n = params_numel(pl);
    float *h = malloc((size_t)*n * sizeof(float)), *p = h;
    for (int i = 0; i < pl->n; i++) {
        tensor_to_host(pl->t[i], p);
        p += tensor_numel(pl->t[i]);
    }
    return h;
}

Test(cuda, vit_mae_sscd_training_on_device_matches_cpu) {
    require_gpu();
    model_on mc, mg;
    model_build(&mc, DEV_CPU);
    model_build(&mg, GPU_DEV);
    /* built on the host from the same Philox streams, then moved: bit-identical start */
    int64_t n, n2;
    float *a = params_host(&mc.all, &n), *b = params_host(&mg.all, &n2);
    cr_assert_eq(n, n2);
    cr_assert(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "initial weights differ between devices");
    free(a); free(b);
    float *x = rnd(MB * 3 * MIMG * MIMG, -1, 1, 230);
    for (int step = 0; step < 3; step++) {
        double gc, gg;
        float lc = model_step(&mc, step, x, &gc, ER_PREC_FP32);
        float lg = model_step(&mg, step, x, &gg, ER_PREC_FP32);
        gpu_ok("vit/mae/sscd step");
        double tol = step == 0 ? 1e-5 : 1e-3;
        cr_assert(fabsf(lc - lg) <= tol * fabsf(lc), "step %d: cpu loss %.7g, cuda loss %.7g", step, lc, lg);
        cr_assert(fabs(gc - gg) <= 1e-4 * gc, "step %d: grad norm cpu %.7g cuda %.7g", step, gc, gg);
        cr_assert(gc > 0.5, "step %d: grad norm %.3g: clipping was not exercised", step, gc);
        cr_log_info("vit+mae+sscd step %d: loss cpu %.7g cuda %.7g, grad norm cpu %.6g cuda %.6g", step, lc, lg, gc, gg);
    }
    /* a checkpoint written from the device loads into a CPU model: the same bits */
    char *path = path_join(test_tmpdir(), "device.safetensors");
    ckpt_state ss = {.params = &mg.all, .opt = mg.opt, .step = 3, .config = "parity"};
    cr_assert_eq(ckpt_save(path, &ss), ER_OK, "%s", er_msg());
    gpu_ok("checkpoint save");
    model_on mr;
    model_build(&mr, DEV_CPU);
    ckpt_state ls = {.params = &mr.all, .opt = mr.opt};
    cr_assert_eq(ckpt_load(path, &ls, CKPT_STRICT, NULL), ER_OK, "%s", er_msg());
    cr_assert_eq(ls.step, 3);
    a = params_host(&mg.all, &n);
    b = params_host(&mr.all, &n2);
    cr_assert(memcmp(a, b, (size_t)n * sizeof(float)) == 0, "device checkpoint -> CPU model changed the weights");
    free(a); free(b);
    cr_assert_eq(mr.opt->step, mg.opt->step);
    for (int i = 0; i < mg.opt->n; i++) {
        int64_t k = tensor_numel(mg.opt->ps[i].v);
        float *va = malloc(k * 4), *vb = malloc(k * 4);
        tensor_to_host(mg.opt->ps[i].v, va);
        tensor_to_host(mr.opt->ps[i].v, vb);
        cr_assert(memcmp(va, vb, k * 4) == 0, "AdamW v of %s", mg.opt->ps[i].p->name);
        free(va); free(vb);
    }
    /* and the CPU copy continues like the device model */
    double gr, gg;
    float lr_ = model_step(&mr, 3, x, &gr, ER_PREC_FP32), lg = model_step(&mg, 3, x, &gg, ER_PREC_FP32);
    gpu_ok("step after reload");
    cr_assert(fabsf(lr_ - lg) <= 1e-5f * fabsf(lg), "after reload: cpu %.7g cuda %.7g", lr_, lg);
    free(path);
    free(x);
    model_free(&mc);
    model_free(&mg);
    model_free(&mr);
}

/* The same model and steps in bf16 mode (nn/layers/autocast.h: bf16 products, bf16 activations
 * inside each block and bf16 activation gradients) on both devices, next to the fp32 run. The GPU's
 * encoder attention runs on the tensor cores (head dim 16), with cuBLASLt epilogues. The two bf16
 * sides round at the same places, but they differ in where attention rounds (the CPU rounds
 * exp(s - max), the GPU exp(s - lse)) and in summation order, so they track rather than match.
 * Each one's rounding noise then moves the AdamW updates (lr 3e-3, clipping) in its own way.
 * Bounds, with the scale the max of |step 0 loss| and |this loss| (the SSCD term takes the total
 * below zero by step 2):
 *   - each bf16 loss within 2.5e-2 of scale of the fp32 run's;
 *   - the two bf16 losses within 3e-2 of scale of each other;
 *   - gradient norms within 5e-2 relative of fp32 and of each other;
 *   - at step 0, each bf16 loss differs from fp32 (bf16 is wired on that device).
 * Seen under the host emulation, steps 0/1/2: loss CPU 6.4995 / 4.6126 / -0.4468 and CUDA
 * 6.5096 / 4.7404 / -0.4495, fp32 6.5136 / 4.6594 / -0.4494 on both. As fractions of scale that is
 * CPU-CUDA 1.5e-3 / 2.0e-2 / 4e-4, and at most 1.3e-2 from fp32. Gradient norms were at most 3.1e-2
 * from fp32 (CUDA, step 2: 44.56 against 45.98). */
Test(cuda, vit_mae_sscd_training_bf16_tracks_cpu) {
    require_gpu();
    model_on mc, mg, mf;
    model_build(&mc, DEV_CPU);
    model_build(&mg, GPU_DEV);
    model_build(&mf, DEV_CPU); /* the fp32 run (the CUDA fp32 run equals it: the test above) */
    float *x = rnd(MB * 3 * MIMG * MIMG, -1, 1, 231), l0 = 0.0f;
    for (int step = 0; step < 3; step++) {
        double gc, gg, gf;
        float lc = model_step(&mc, step, x, &gc, ER_PREC_BF16);
        float lg = model_step(&mg, step, x, &gg, ER_PREC_BF16);
        float lf = model_step(&mf, step, x, &gf, ER_PREC_FP32);
        gpu_ok("bf16 vit/mae/sscd step");
        cr_log_info("bf16 vit+mae+sscd step %d: loss cpu %.7g cuda %.7g (fp32 %.7g), grad norm cpu %.6g cuda %.6g (fp32 %.6g)",
                    step, lc, lg, lf, gc, gg, gf);
        if (step == 0) {
            l0 = fabsf(lf);
            cr_assert(lc != lf && lg != lf, "step 0: a bf16 loss equals fp32's (cpu %.9g cuda %.9g fp32 %.9g): bf16 not applied", lc,
                      lg, lf);
        }
        const float sc = fmaxf(l0, fabsf(lf));
        cr_assert(fabsf(lc - lf) <= 2.5e-2f * sc && fabsf(lg - lf) <= 2.5e-2f * sc,
                  "step %d: bf16 loss cpu %.7g cuda %.7g, fp32 %.7g", step, lc, lg, lf);
        cr_assert(fabsf(lc - lg) <= 3e-2f * sc, "step %d: bf16 loss cpu %.7g, cuda %.7g", step, lc, lg);
        cr_assert(fabs(gc - gf) <= 5e-2 * gf && fabs(gg - gf) <= 5e-2 * gf && fabs(gc - gg) <= 5e-2 * gc,
                  "step %d: grad norm bf16 cpu %.7g cuda %.7g, fp32 %.7g", step, gc, gg, gf);
    }
    free(x);
    model_free(&mc);
    model_free(&mg);
    model_free(&mf);
}

/* Every entry of kernels/ops.def is filled in the CPU table and (when present) the CUDA table, and
 * has a PARITY_COVERS mark above the test that compares the two. */
#define ER_OP(ret, name, params, args) extern const char parity_covers_##name[];
#include "kernels/ops.def"
#undef ER_OP
Test(cuda, every_op_is_filled_and_covered) {
    const er_backend *tabs[2] = {backend_get(DEV_CPU), backend_get(DEV_CUDA)};
    for (int t = 0; t < 2; t++) {
        const er_backend *b = tabs[t];
        if (!b) continue; /* no CUDA in this build or on this machine */
        const char *b_name = b->name;
#define ER_OP(ret, name, params, args)                                                                   \
    cr_expect(b->name != NULL, "%s table: op %s is NULL", b_name, #name);             \
    cr_expect_str_eq(parity_covers_##name, #name);
#include "kernels/ops.def"
#undef ER_OP
    }
}
