/* matmul (batched, transposed operands, transposed views, shared weights) and linear. */
#include <math.h>
#include <string.h>

#include "kernels/gemm.h"
#include "tests/nn/gradcheck.h"
#include "tests/test_util.h"

typedef struct { int tA, tB, view; } mm_ctx;

/* With view = 1 the transposed operand is passed as a transposed view (tA/tB = 0) instead. */
static tensor *f_matmul(tensor **in, void *cv) {
    mm_ctx *c = cv;
    if (c->view) {
        tensor *a = c->tA ? op_transpose(in[0], -1, -2) : in[0];
        tensor *b = c->tB ? op_transpose(in[1], -1, -2) : in[1];
        return op_matmul(a, b, 0, 0);
    }
    return op_matmul(in[0], in[1], c->tA, c->tB);
}

static void check_matmul(int batch, int M, int N, int K, int shared_b, mm_ctx c, int seed) {
    int64_t as[3], bs[3];
    int na = batch ? 3 : 2, nb = batch && !shared_b ? 3 : 2;
    int o = na - 2;
    if (batch) as[0] = batch;
    as[o] = c.tA ? K : M;
    as[o + 1] = c.tA ? M : K;
    o = nb - 2;
    if (nb == 3) bs[0] = batch;
    bs[o] = c.tB ? N : K;
    bs[o + 1] = c.tB ? K : N;
    tensor *a = gc_rand(na, as, seed, -1, 1), *b = gc_rand(nb, bs, seed + 1, -1, 1);
    tensor *in[2] = {a, b};
    tensor *y = f_matmul(in, &c);
    cr_assert_not_null(y, "%s", er_msg());
    int nbat = batch ? batch : 1;
    for (int p = 0; p < nbat; p++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) {
                    const float *A = a->data + (na == 3 ? (int64_t)p * M * K : 0);
                    const float *B = b->data + (nb == 3 ? (int64_t)p * K * N : 0);
                    double va = c.tA ? A[k * M + i] : A[i * K + k];
                    double vb = c.tB ? B[j * K + k] : B[k * N + j];
                    s += va * vb;
                }
                cr_assert_float_eq(y->data[((int64_t)p * M + i) * N + j], s, 1e-4 * (1 + fabs(s)),
                                   "b%d M%d N%d K%d tA%d tB%d view%d", batch, M, N, K, c.tA, c.tB, c.view);
            }
    gc_opts o2 = gc_default();
    o2.max_elems = 120;
    cr_assert_eq(gradcheck("matmul", f_matmul, &c, 2, in, o2), 0, "b%d M%d N%d K%d tA%d tB%d view%d shared%d",
                 batch, M, N, K, c.tA, c.tB, c.view, shared_b);
    gc_free(2, in);
    nn_step_end();
}

Test(nn_matmul, all_transposes_batched_shared_views) {
    const int dims[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 1}, {2, 4, 197}};
    for (int d = 0; d < 4; d++)
        for (int t = 0; t < 4; t++)
            for (int view = 0; view < 2; view++) {
                mm_ctx c = {t & 1, t >> 1, view};
                check_matmul(0, dims[d][0], dims[d][1], dims[d][2], 0, c, 10 * d + t);
                check_matmul(3, dims[d][0], dims[d][1], dims[d][2], 0, c, 10 * d + t + 100);
                check_matmul(2, dims[d][0], dims[d][1], dims[d][2], 1, c, 10 * d + t + 200);
            }
}

static tensor *f_linear(tensor **in, void *c) { return op_linear(in[0], in[1], c ? in[2] : NULL); }

Test(nn_matmul, linear_with_and_without_bias) {
    tensor *in[3] = {gc_rand(3, SHAPE(2, 17, 5), 1, -1, 1), gc_rand(2, SHAPE(3, 5), 2, -1, 1),
                     gc_rand(1, SHAPE(3), 3, -1, 1)};
    tensor *y = op_linear(in[0], in[1], in[2]);
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[2], 3);
    for (int r = 0; r < 34; r++)
        for (int o = 0; o < 3; o++) {
            double s = in[2]->data[o];
            for (int k = 0; k < 5; k++) s += (double)in[0]->data[r * 5 + k] * in[1]->data[o * 5 + k];
            cr_assert_float_eq(y->data[r * 3 + o], s, 1e-5);
        }
    cr_assert_eq(gradcheck("linear", f_linear, (void *)1, 3, in, gc_default()), 0);
    cr_assert_eq(gradcheck("linear_nobias", f_linear, NULL, 2, in, gc_default()), 0);
    cr_assert_null(op_linear(in[0], in[2], NULL));
    gc_free(3, in);
}

Test(nn_matmul, frozen_weight_trainable_bias) {
    /* only the bias requires grad: its gradient is the column sum of the output gradient */
    tensor *x = tensor_new(2, SHAPE(3, 4)), *w = tensor_new(2, SHAPE(2, 4));
    tensor *b = tensor_param("head.bias", 1, SHAPE(2));
    for (int i = 0; i < 12; i++) x->data[i] = 0.1f * i;
    for (int i = 0; i < 8; i++) w->data[i] = 0.2f * i - 0.5f;
    tensor *y = op_linear(x, w, b);
    float g[6] = {1, 2, 3, 4, 5, 6};
    cr_assert_eq(backward_with(y, tensor_from_host(2, SHAPE(3, 2), g)), ER_OK, "%s", er_msg());
    cr_assert_float_eq(b->grad->data[0], 1 + 3 + 5, 1e-6);
    cr_assert_float_eq(b->grad->data[1], 2 + 4 + 6, 1e-6);
    cr_assert_null(w->grad);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
}

/* A prepacked weight (tensor_prepack) under autograd: the forward reads the packed panels, the
 * backward reads the weight; output and every gradient equal those of the same unpacked layer,
 * bit for bit (odd sizes, a 3-D input folded into one product). In bf16 (a bf16 x, inference: the
 * bf16 layer reads the packed panels only without a tape) the output equals the unpacked one's. */
Test(nn_matmul, prepacked_weight_same_output_and_gradients) {
    for (int prec = SGEMM_FP32; prec <= SGEMM_BF16; prec++) {
        tensor *x[2], *w[2], *b[2], *y[2];
        for (int v = 0; v < 2; v++) {
            x[v] = tensor_param("x", 3, SHAPE(2, 13, 37));
            w[v] = tensor_param("w", 2, SHAPE(29, 37));
            b[v] = tensor_param("b", 1, SHAPE(29));
            for (int i = 0; i < 2 * 13 * 37; i++) x[v]->data[i] = sinf(0.37f * i);
            for (int i = 0; i < 29 * 37; i++) w[v]->data[i] = cosf(0.11f * i) * 0.3f;
            for (int i = 0; i < 29; i++) b[v]->data[i] = 0.01f * i;
        }
        cr_assert_eq(tensor_prepack(w[1], prec == SGEMM_BF16 ? GEMM_COMPUTE_BF16 : GEMM_COMPUTE_FP32), ER_OK, "%s", er_msg());
        cr_assert_not_null(w[1]->packed);
        if (prec == SGEMM_BF16) {
            float yh[2][2 * 13 * 29];
            NO_GRAD {
                for (int v = 0; v < 2; v++) tensor_to_host(op_linear_to(op_cast(x[v], DT_BF16), w[v], b[v], DT_F32), yh[v]);
            }
            cr_assert(memcmp(yh[0], yh[1], sizeof yh[0]) == 0, "bf16: packed and unpacked outputs differ");
            nn_step_end();
            for (int v = 0; v < 2; v++) tensor_free(x[v]), tensor_free(w[v]), tensor_free(b[v]);
            continue;
        }
        float g[2 * 13 * 29];
        for (int i = 0; i < 2 * 13 * 29; i++) g[i] = sinf(0.05f * i + 1.0f);
        for (int v = 0; v < 2; v++) {
            y[v] = op_linear(x[v], w[v], b[v]);
            cr_assert_eq(backward_with(y[v], tensor_from_host(3, SHAPE(2, 13, 29), g)), ER_OK, "%s", er_msg());
        }
        cr_assert(memcmp(y[0]->data, y[1]->data, sizeof(float) * 2 * 13 * 29) == 0, "prec %d: outputs differ", prec);
        cr_assert(memcmp(x[0]->grad->data, x[1]->grad->data, sizeof(float) * 2 * 13 * 37) == 0, "prec %d: dx differs", prec);
        cr_assert(memcmp(w[0]->grad->data, w[1]->grad->data, sizeof(float) * 29 * 37) == 0, "prec %d: dw differs", prec);
        cr_assert(memcmp(b[0]->grad->data, b[1]->grad->data, sizeof(float) * 29) == 0, "prec %d: db differs", prec);
        nn_step_end();
        for (int v = 0; v < 2; v++) tensor_free(x[v]), tensor_free(w[v]), tensor_free(b[v]);
    }
}

/* op_linear_add: res + x W^T + b in one product (the residual in gemm_ex's epilogue). The same bits
 * as the separate matmul, bias add and residual add it replaces (forward and every gradient in fp32;
 * the residual's gradient also receiving another path's contribution; bf16: tests/nn/test_ops_bf16.c), and its gradients
 * against finite differences, with and without bias. */
static tensor *f_linear_add(tensor **in, void *c) { return op_linear_add(in[0], in[1], in[2], in[3]); }
static tensor *f_linear_add_nobias(tensor **in, void *c) { return op_linear_add(in[0], in[1], NULL, in[2]); }

Test(nn_matmul, linear_add_equals_separate_ops_bit_for_bit) {
    { /* fp32 (prec names the runs in the messages) */
        const int prec = SGEMM_FP32;
        tensor *x[2], *w[2], *b[2], *r[2], *out[2];
        for (int v = 0; v < 2; v++) {
            x[v] = tensor_param("x", 3, SHAPE(2, 11, 37));
            w[v] = tensor_param("w", 2, SHAPE(23, 37));
            b[v] = tensor_param("b", 1, SHAPE(23));
            r[v] = tensor_param("r", 3, SHAPE(2, 11, 23));
            for (int i = 0; i < 2 * 11 * 37; i++) x[v]->data[i] = sinf(0.37f * i);
            for (int i = 0; i < 23 * 37; i++) w[v]->data[i] = cosf(0.11f * i) * 0.3f;
            for (int i = 0; i < 23; i++) b[v]->data[i] = 0.01f * i - 0.1f;
            for (int i = 0; i < 2 * 11 * 23; i++) r[v]->data[i] = cosf(0.7f * i);
        }
        /* v = 0: the old composition (matmul, broadcast bias add, residual add); v = 1: the fused op.
         * The residual also feeds a second consumer (r * 2), as the residual stream feeds the next norm. */
        float g[2 * 11 * 23];
        for (int i = 0; i < 2 * 11 * 23; i++) g[i] = sinf(0.05f * i + 1.0f);
        for (int v = 0; v < 2; v++) { /* each graph's backward before the next is recorded: it consumes the tape */
            tensor *twice = op_mul_scalar(r[v], 2.0f);
            out[v] = v ? op_add(op_linear_add(x[1], w[1], b[1], r[1]), twice)
                       : op_add(op_add(r[0], op_add(op_matmul(x[0], w[0], 0, 1), b[0])), twice);
            cr_assert_eq(backward_with(out[v], tensor_from_host(3, SHAPE(2, 11, 23), g)), ER_OK, "%s", er_msg());
        }
        cr_assert(memcmp(out[0]->data, out[1]->data, sizeof(float) * 2 * 11 * 23) == 0, "prec %d: outputs differ", prec);
        cr_assert(memcmp(x[0]->grad->data, x[1]->grad->data, sizeof(float) * 2 * 11 * 37) == 0, "prec %d: dx", prec);
        cr_assert(memcmp(w[0]->grad->data, w[1]->grad->data, sizeof(float) * 23 * 37) == 0, "prec %d: dw", prec);
        cr_assert(memcmp(b[0]->grad->data, b[1]->grad->data, sizeof(float) * 23) == 0, "prec %d: db", prec);
        cr_assert(memcmp(r[0]->grad->data, r[1]->grad->data, sizeof(float) * 2 * 11 * 23) == 0, "prec %d: dres", prec);
        nn_step_end();
        for (int v = 0; v < 2; v++) tensor_free(x[v]), tensor_free(w[v]), tensor_free(b[v]), tensor_free(r[v]);
    }
}

Test(nn_matmul, linear_add_gradients_and_shape_errors) {
    tensor *in[4] = {gc_rand(3, SHAPE(2, 9, 5), 11, -1, 1), gc_rand(2, SHAPE(3, 5), 12, -1, 1),
                     gc_rand(1, SHAPE(3), 13, -1, 1), gc_rand(3, SHAPE(2, 9, 3), 14, -1, 1)};
    tensor *y = op_linear_add(in[0], in[1], in[2], in[3]);
    for (int r = 0; r < 18; r++)
        for (int o = 0; o < 3; o++) {
            double s = in[2]->data[o] + in[3]->data[r * 3 + o];
            for (int k = 0; k < 5; k++) s += (double)in[0]->data[r * 5 + k] * in[1]->data[o * 5 + k];
            cr_assert_float_eq(y->data[r * 3 + o], s, 1e-5);
        }
    tensor *nob[3] = {in[0], in[1], in[3]};
    cr_assert_eq(gradcheck("linear_add", f_linear_add, NULL, 4, in, gc_default()), 0);
    cr_assert_eq(gradcheck("linear_add_nobias", f_linear_add_nobias, NULL, 3, nob, gc_default()), 0);
    tensor *bad = tensor_new(3, SHAPE(2, 9, 4)); /* residual of the wrong width */
    cr_assert_null(op_linear_add(in[0], in[1], in[2], bad));
    cr_assert(strstr(er_msg(), "linear_add") && strstr(er_msg(), "residual"), "%s", er_msg());
    tensor_free(bad);
    nn_step_end();
    gc_free(4, in);
}

