/* ops_linear_bf16.c — the linear layer on bf16 activations (issue #27): x bf16 [M, K], the fp32
 * master weight W [N, K] read through a bf16 copy (the one the optimizer's last step wrote, or one
 * made for this call; kept for the backward),
 * y = x W^T (+ bias) (+ residual) with fp32 accumulation, one gemm_ex. y is bf16 or fp32 as asked
 * (op_linear_to: fp32 for a head that feeds a loss), and fp32 with a residual: the residual stream
 * stays fp32, so y = res + x W^T + bias is fp32. The bias and W's
 * gradients are fp32; x's gradient is bf16 (x's type).
 *
 * The backward, with gy = dL/dy:
 *   gy bf16 as is, or an fp32 gy (the residual case) rounded to bf16 once into scratch: every
 *   product reads bf16 operands, which is what bf16 compute does to fp32 operands anyway (same
 *   bits on the CPU), and cuBLASLt takes A and B of one type only;
 *   dbias += column sums of gy (fp32 sums of the fp32 or widened bf16 values), in the same pass
 *            over gy as that rounding (the bias_grad kernel: no widened copy of a bf16 gy)
 *   dX (+)= gy W         (bf16 x bf16 -> bf16, accumulated as round(dX + product))
 *   dW  += gy^T x        (bf16 x bf16 -> fp32, into W's fp32 gradient)
 *   dres += gy                                     as the fp32 layer: linear_residual_grad
 * The bias-gradient epilogue is fp32-only (kernels/gemm_ex_args.h), so the bias sum is its own pass. */
#include "nn/ops_linear_bf16.h"

#include "nn/ops_util.h"

/* bf16 copy of the packed fp32 tensor t, in arena memory */
static tensor *bf16_copy(tensor *t) {
    tensor *c = tensor_empty_dt(t->device, DT_BF16, t->ndim, t->shape);
    if (c && tensor_numel(t) > 0) BE(t)->cast(tensor_numel(t), ER_F32, t->data, ER_BF16, c->raw, 0);
    return c;
}

/* One gemm_ex with the scratch a bf16 D needs, released after the call. */
static void run_gemm_ex(const er_backend *be, gemm_ex_args *g, int device) {
    arena_mark mk = ops_mark(device);
    long w = gemm_ex_work_floats(g);
    if (w) g->work = ops_scratch(device, w);
    be->gemm_ex(g);
    ops_release(device, mk);
}

/* D (+)= op(A) op(B) with bf16 A and B; D of type d_type, accumulated when beta is 1 */
static void product(const er_backend *be, int tA, int tB, int m, int n, int k, const void *A, int lda,
                    const void *B, int ldb, float beta, int d_type, void *D, int ldd, int device) {
    const int t = d_type == DT_BF16 ? GEMM_BF16 : GEMM_F32;
    gemm_ex_args g = {.transA = tA, .transB = tB, .m = m, .n = n, .k = k, .alpha = 1.0f, .beta = beta,
                      .A = A, .lda = lda, .B = B, .ldb = ldb, .C = beta != 0.0f ? D : NULL, .ldc = ldd,
                      .D = D, .ldd = ldd, .a_type = GEMM_BF16, .b_type = GEMM_BF16, .c_type = t, .d_type = t,
                      .compute = GEMM_COMPUTE_BF16};
    run_gemm_ex(be, &g, device);
}

static void linear_bf16_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *bias = n->in[2], *res = n->in[3], *y = n->out, *wb = n->ctx;
    const int M = (int)n->i[0], N = (int)n->i[1], K = (int)n->i[2];
    const er_backend *be = BE(y);
    /* the gradient buffers first: the scratch below is released at the end, with everything the
     * arena gave after the mark */
    int fresh;
    tensor *gbias = bias ? grad_buf(bias) : NULL, *gw = grad_buf(w), *gx = grad_buf_fresh(x, &fresh);
    arena_mark mk = ops_mark(y->device);
    const void *gy = y->grad->raw;
    /* one pass over gy for the bias sums and, when gy is fp32 (the residual case), its bf16 rounding
     * (what bf16 compute does to it) for the products */
    uint16_t *g16 = y->dtype != DT_BF16 ? (uint16_t *)ops_scratch(y->device, ((int64_t)M * N + 1) / 2) : NULL;
    if (gbias || g16) {
        float *work = ops_scratch(y->device, (int64_t)be->bias_grad_workspace(M, N, y->dtype));
        be->bias_grad(M, N, y->dtype, gy, gbias ? gbias->data : NULL, g16, work);
    }
    if (g16) gy = g16;
    if (M > 0 && N > 0 && K > 0) {
        if (gw) /* dW[N,K] += gy^T x */
            product(be, 1, 0, N, K, M, gy, N, x->raw, K, 1.0f, DT_F32, gw->data, K, y->device);
        if (gx) /* dX[M,K] (+)= gy W */
            product(be, 0, 0, M, K, N, gy, N, wb->raw, K, fresh ? 0.0f : 1.0f, x->dtype, gx->raw, K, y->device);
    } else if (gx && fresh) {
        tensor_fill(gx, 0.0f); /* K > 0 with M or N 0: a fresh buffer must still be written */
    }
    ops_release(y->device, mk);
    linear_residual_grad(n, res, y);
}

tensor *linear_bf16(tensor *x2, tensor *w, tensor *bias, tensor *res, int y_dtype, int nd, const int64_t *yshape) {
    if (res && res->dtype != DT_F32) {
        er_fail(ER_INPUT, "linear_add: a bf16 input takes an fp32 residual stream (got %s)", er_dtype_name(res->dtype));
        return NULL;
    }
    w = op_contiguous(w);
    if (!w) return NULL;
    const int64_t M = x2->shape[0], K = x2->shape[1], N = w->shape[0];
    /* inference with a prepacked weight (model_prepack, CPU only): the fp32 W's bf16 panels are read
     * as they are; the bf16 copy of W is made only when a backward may need it */
    const int packed = w->packed && !grad_enabled();
    /* training: the bf16 copy the optimizer's last step wrote (optim_config.bf16_weights), else one
     * made now; either is W rounded to nearest even, so the products have the same bits */
    tensor *wb = packed ? NULL : (w->bf16 && (w->flags & T_BF16_FRESH)) ? w->bf16 : bf16_copy(w);
    if (res) y_dtype = DT_F32;
    tensor *y = tensor_empty_dt(x2->device, y_dtype, nd, yshape);
    if ((!packed && !wb) || !y) return NULL;
    if (M > 0 && N > 0) {
        gemm_ex_args a = {.transA = 0, .transB = 1, .m = (int)M, .n = (int)N, .k = (int)K, .alpha = 1.0f, .beta = 1.0f,
                          .A = x2->raw, .lda = (int)K, .B = packed ? w->data : wb->raw, .ldb = (int)K,
                          .C = res ? res->data : NULL, .ldc = (int)N, .D = y->raw, .ldd = (int)N,
                          .bias = bias ? bias->data : NULL, .a_type = GEMM_BF16,
                          .b_type = packed ? GEMM_F32 : GEMM_BF16, .c_type = GEMM_F32,
                          .d_type = y_dtype == DT_F32 ? GEMM_F32 : GEMM_BF16, .compute = GEMM_COMPUTE_BF16,
                          .packed_b = packed ? w->packed : NULL};
        run_gemm_ex(BE(x2), &a, x2->device);
    }
    tensor *in[4] = {x2, w, bias, res};
    tape_node *n = tape_record(res ? "linear_add" : "linear", linear_bf16_backward, y, 4, in);
    if (n) {
        n->i[0] = M;
        n->i[1] = N;
        n->i[2] = K;
        n->ctx = wb; /* arena memory: lives until the step ends, as the tape does */
    }
    return y;
}
