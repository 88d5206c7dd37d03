/* ops_matmul.c — batched matrix products (either operand transposed) and linear layers.
 * Operands are used in place whenever their last two dims have a unit stride (a transposed view
 * is just the other gemm transpose flag) and their batch dims collapse to one stride. */
#include "nn/ops_linear_bf16.h"
#include "nn/ops_util.h"

/* How a [..., R, C] operand is handed to gemm. */
typedef struct {
    int trans;     /* storage is the transpose of the logical [R, C] matrix */
    int ld;
    long bstride;  /* elements between batch matrices (0 = shared) */
} matdesc;

static int describe(const tensor *t, int nbatch_out, matdesc *d) {
    int nd = t->ndim;
    int64_t sr = t->stride[nd - 2], sc = t->stride[nd - 1], R = t->shape[nd - 2], C = t->shape[nd - 1];
    if (sc == 1 || C == 1) {
        d->trans = 0;
        d->ld = (int)(R == 1 ? (C > 0 ? C : 1) : sr);
        if (d->ld < C) return 0;
    } else if (sr == 1 || R == 1) {
        d->trans = 1;
        d->ld = (int)sc;
        if (d->ld < R) return 0;
    } else {
        return 0;
    }
    if (nd == 2) {
        d->bstride = 0;
        return 1;
    }
    /* batch dims [0, nd-2) must form one arithmetic progression */
    int64_t bs = 0, expect = -1;
    for (int i = nd - 3; i >= 0; i--) {
        if (t->shape[i] == 1) continue;
        if (expect < 0) {
            bs = t->stride[i];
            expect = bs * t->shape[i];
        } else {
            if (t->stride[i] != expect) return 0;
            expect *= t->shape[i];
        }
    }
    d->bstride = bs;
    (void)nbatch_out;
    return 1;
}

/* A linear layer's bias gradient riding in its weight-gradient product (gemm_ex's bias-gradient
 * epilogue): the bias's gradient buffer and the epilogue's scratch. */
typedef struct {
    float *grad, *work;
} grad_bias;

/* C (+)= alpha op(A) op(B) over `batch` matrices (beta 0 or 1: written or accumulated), a product of a
 * backward. One matrix goes through gemm_ex, C as D's accumulator (on CUDA a cuBLASLt plan cached
 * per shape, as the forward's linear layers use: bench/RESULTS_cuda.md, session 10), several through
 * gemm_batched. On the CPU both are the same sgemm call: the same bits. */
static void grad_gemm(const er_backend *be, int compute, int tA, int tB, int m, int n, int k, float alpha,
                      const float *A, int lda, long sA, const float *B, int ldb, long sB, float beta, float *C,
                      int ldc, long sC, int batch, const grad_bias *gb) {
    if (batch != 1) {
        be->gemm_batched(compute, tA, tB, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
        return;
    }
    gemm_ex_args g = {.transA = tA, .transB = tB, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
                      .A = A, .lda = lda, .B = B, .ldb = ldb, .C = beta != 0.0f ? C : NULL, .ldc = ldc,
                      .D = C, .ldd = ldc, .compute = compute,
                      .bias_grad = gb ? gb->grad : NULL, .work = gb ? gb->work : NULL};
    be->gemm_ex(&g);
}

/* The gradients of C = op(A) op(B) (gy = dC, [batch,] M x N) into a's and b's gradient buffers:
 * matmul's backward, and the product part of linear's. */
static void matmul_grads(tensor *a, tensor *b, const tensor *y, int tA, int tB, int M, int N, int K, int batch,
                         int compute, const grad_bias *bias) {
    matdesc da, db;
    describe(a, batch, &da);
    describe(b, batch, &db);
    int ta = da.trans ^ tA, tb = db.trans ^ tB; /* storage flags of op(A), op(B) */
    const er_backend *be = BE(y);
    const float *gy = y->grad->data;
    long sy = (long)M * N;
    int fresh;
    tensor *ga = grad_buf_fresh(a, &fresh), *gb = grad_buf(b);
    /* the bias-gradient epilogue's scratch, taken after the gradient buffers (a release frees
     * everything the arena gave since the mark) */
    arena_mark mark = ops_mark(y->device);
    grad_bias bg = bias && gb ? *bias : (grad_bias){NULL, NULL};
    if (bg.grad) {
        int64_t xs[2] = {M, N}, ys[2] = {1, N};
        bg.work = ops_scratch(y->device, (int64_t)be->sum_to_workspace(2, xs, ys));
    }
    if (ga) {
        long sga = da.bstride ? (long)M * K : 0;
        /* a gradient buffer created just now is written (beta 0) rather than zero-filled and added
         * to; a shared A (sga 0) over a batch sums the batch into it, so that one is zeroed */
        if (fresh && !sga && batch > 1) {
            tensor_fill(ga, 0.0f);
            fresh = 0;
        }
        float beta = fresh ? 0.0f : 1.0f;
        if (!tA) /* gA[M,K] += dC opB^T */
            grad_gemm(be, compute, 0, !tb, M, K, N, 1.0f, gy, N, sy, b->data, db.ld, db.bstride, beta,
                      ga->data, K, sga, batch, NULL);
        else /* gA[K,M] += opB dC^T */
            grad_gemm(be, compute, tb, 1, K, M, N, 1.0f, b->data, db.ld, db.bstride, gy, N, sy, beta,
                      ga->data, M, sga, batch, NULL);
    }
    if (gb) {
        long sgb = db.bstride ? (long)K * N : 0;
        int nb = sgb ? batch : 1, reps = sgb ? 1 : batch; /* shared b: sum over the batch in turn */
        for (int r = 0; r < reps; r++) {
            const float *ap = a->data + (long)r * da.bstride, *gp = gy + (long)r * sy;
            if (!tB) /* gB[K,N] += opA^T dC */
                grad_gemm(be, compute, !ta, 0, K, N, M, 1.0f, ap, da.ld, da.bstride, gp, N, sy, 1.0f,
                          gb->data, N, sgb, nb, NULL);
            else /* gB[N,K] += dC^T opA */
                grad_gemm(be, compute, 1, ta, N, K, M, 1.0f, gp, N, sy, ap, da.ld, da.bstride, 1.0f,
                          gb->data, K, sgb, nb, bg.grad ? &bg : NULL); /* only linear passes a bias: batch 1, one call */
        }
    }
    ops_release(y->device, mark);
}

/* The backward's products run in the precision the forward's did (recorded in the node), whatever
 * the op layer's setting is when the tape is walked. */
static void matmul_backward(tape_node *n) {
    matmul_grads(n->in[0], n->in[1], n->out, (int)n->i[0], (int)n->i[1], (int)n->i[2], (int)n->i[3], (int)n->i[4],
                 (int)n->i[5], (int)n->i[6], NULL);
}

tensor *op_matmul(tensor *a, tensor *b, int transA, int transB) {
    OPS_F32("matmul", a, b);
    if (!a || !b) return NULL;
    char s0[96], s1[96];
    if (a->ndim < 2 || b->ndim < 2 || (b->ndim != 2 && b->ndim != a->ndim)) {
        er_fail(ER_INPUT, "matmul: shapes %s and %s: need [..., M, K] and [..., K, N] or [K, N]",
                ops_shape(a, s0), ops_shape(b, s1));
        return NULL;
    }
    int nd = a->ndim;
    int64_t M = a->shape[nd - 2 + transA], K = a->shape[nd - 1 - transA];
    int64_t Kb = b->shape[b->ndim - 2 + transB], N = b->shape[b->ndim - 1 - transB];
    int ok = K == Kb;
    for (int i = 0; ok && b->ndim == nd && i < nd - 2; i++) ok = a->shape[i] == b->shape[i];
    if (!ok) {
        er_fail(ER_INPUT, "matmul: shapes %s%s and %s%s do not match", ops_shape(a, s0),
                transA ? "^T" : "", ops_shape(b, s1), transB ? "^T" : "");
        return NULL;
    }
    int64_t batch = 1;
    for (int i = 0; i < nd - 2; i++) batch *= a->shape[i];
    matdesc da, db;
    /* shared weight and a non-transposed A with packed batch: fold the batch into M (one big gemm) */
    if (b->ndim == 2 && nd > 2 && !transA && tensor_is_contiguous(a)) {
        tensor *a2 = op_reshape(a, 2, SHAPE(batch * M, K));
        tensor *y2 = op_matmul(a2, b, 0, transB);
        int64_t sh[T_MAX_DIMS];
        for (int i = 0; i < nd - 2; i++) sh[i] = a->shape[i];
        sh[nd - 2] = M;
        sh[nd - 1] = N;
        return op_reshape(y2, nd, sh);
    }
    if (!describe(a, (int)batch, &da)) {
        a = op_clone(a);
        describe(a, (int)batch, &da);
    }
    if (!describe(b, (int)batch, &db)) {
        b = op_clone(b);
        describe(b, (int)batch, &db);
    }
    int64_t sh[T_MAX_DIMS];
    for (int i = 0; i < nd - 2; i++) sh[i] = a->shape[i];
    sh[nd - 2] = M;
    sh[nd - 1] = N;
    tensor *y = ops_new(a, nd, sh);
    const int compute = GEMM_COMPUTE_FP32; /* fp32 operands (ops follow their operands' dtype) */
    if (M > 0 && N > 0 && b->packed && batch == 1) /* a frozen weight (tensor_prepack) */
        BE(a)->gemm_prepacked(compute, da.trans ^ transA, db.trans ^ transB, (int)M, (int)N, (int)K, 1.0f,
                              a->data, da.ld, b->data, db.ld, b->packed, 0.0f, y->data, (int)N);
    else if (M > 0 && N > 0)
        BE(a)->gemm_batched(compute, da.trans ^ transA, db.trans ^ transB, (int)M, (int)N, (int)K, 1.0f,
                            a->data, da.ld, da.bstride, b->data, db.ld, db.bstride, 0.0f, y->data,
                            (int)N, (long)(M * N), (int)batch);
    tensor *in[2] = {a, b};
    tape_node *n = tape_record("matmul", matmul_backward, y, 2, in);
    if (n) {
        n->i[0] = transA;
        n->i[1] = transB;
        n->i[2] = M;
        n->i[3] = N;
        n->i[4] = K;
        n->i[5] = batch;
        n->i[6] = compute;
    }
    return y;
}

void linear_bias_sums(tensor *gb, const tensor *y, const float *g) {
    int64_t ones[T_MAX_DIMS], N = gb->shape[0];
    for (int i = 0; i < y->ndim; i++) ones[i] = 1;
    ones[y->ndim - 1] = N;
    arena_mark m = ops_mark(y->device);
    float *work = ops_scratch(y->device, (int64_t)BE(y)->sum_to_workspace(y->ndim, y->shape, ones));
    BE(y)->sum_to(y->ndim, y->shape, g, ones, gb->data, 1, work);
    ops_release(y->device, m);
}

void linear_residual_grad(tape_node *n, tensor *res, const tensor *y) {
    int fresh;
    tensor *gr = res && !tape_give_grad(n, res) ? grad_buf_fresh(res, &fresh) : NULL;
    if (gr) {
        int64_t len[1] = {tensor_numel(y)}, one[1] = {1};
        BE(y)->binary_grad(BIN_ADD, 0, 1, len, res->data, one, y->data, one, y->grad->data, gr->data, !fresh);
    }
}

/* linear(_add)'s backward: bias += column sums, the product's gradients, then residual += gy. The
 * residual's gradient is gy itself: when it has no buffer yet it takes y's (tape_give_grad: no copy;
 * the residual stream's other consumers add to it), which is why it comes last. The gradients have
 * the bits of the separate add, bias and matmul nodes this op replaces (each buffer receives the
 * same contributions in the same order). */
static void linear_backward(tape_node *n) {
    tensor *x = n->in[0], *w = n->in[1], *bias = n->in[2], *res = n->in[3], *y = n->out;
    /* the bias gradient rides in the weight-gradient product when there is one (gemm_ex's epilogue:
     * the same sum_to on the CPU, cuBLASLt's BGRADB on CUDA), else it is its own sum_to */
    tensor *gbias = bias ? grad_buf(bias) : NULL;
    const int ride = gbias && (w->flags & T_REQUIRES_GRAD) && n->i[0] > 0 && n->i[1] > 0;
    grad_bias gb = {ride ? gbias->data : NULL, NULL};
    if (gbias && !ride) linear_bias_sums(gbias, y, y->grad->data);
    matmul_grads(x, w, y, 0, 1, (int)n->i[0], (int)n->i[1], (int)n->i[2], 1, (int)n->i[3], ride ? &gb : NULL);
    linear_residual_grad(n, res, y);
}

/* y = x W^T (+ bias) (+ residual), one gemm_ex: the bias and the residual add ride in the product's
 * epilogue (cuBLASLt on CUDA; on the CPU the same passes as before, in the same order). */
static tensor *linear_fused(tensor *x, tensor *w, tensor *bias, tensor *res, int y_dtype) {
    int nd = x->ndim;
    int64_t K = x->shape[nd - 1], N = w->shape[0], M = tensor_numel(x) / (K > 0 ? K : 1);
    tensor *x2 = op_reshape(x, 2, SHAPE(M, K)); /* x is contiguous: a view whose gradient is x's */
    int64_t sh[T_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) sh[i] = x->shape[i];
    sh[nd - 1] = N;
    if (x2 && x->dtype == DT_BF16) return linear_bf16(x2, w, bias, res, y_dtype, nd, sh); /* bf16 activations */
    matdesc dw;
    if (!x2 || !describe(w, 1, &dw)) {
        if (x2) w = op_clone(w);
        if (!x2 || !w || !describe(w, 1, &dw)) return NULL;
    }
    tensor *y = ops_new(x, nd, sh);
    const int compute = GEMM_COMPUTE_FP32; /* an fp32 x: fp32 products (autocast casts x to bf16) */
    if (M > 0 && N > 0) {
        gemm_ex_args a = {.transA = 0, .transB = dw.trans ^ 1, .m = (int)M, .n = (int)N, .k = (int)K, .alpha = 1.0f,
                          .beta = 1.0f, .A = x2->data, .lda = (int)K, .B = w->data, .ldb = dw.ld,
                          .C = res ? res->data : NULL, .ldc = (int)N, .D = y->data, .ldd = (int)N,
                          .bias = bias ? bias->data : NULL,
                          .compute = compute,
                          .packed_b = w->packed};
        BE(x)->gemm_ex(&a);
    }
    tensor *in[4] = {x2, w, bias, res};
    tape_node *n = tape_record(res ? "linear_add" : "linear", linear_backward, y, 4, in);
    if (n) {
        n->i[0] = M;
        n->i[1] = N;
        n->i[2] = K;
        n->i[3] = compute;
    }
    return y;
}

static int linear_shapes_ok(const char *op, const tensor *x, const tensor *w, const tensor *bias, const tensor *res) {
    int ok = w->ndim == 2 && x->ndim >= 1 && x->shape[x->ndim - 1] == w->shape[1] &&
             (!bias || (bias->ndim == 1 && bias->shape[0] == w->shape[0]));
    if (ok && res) {
        ok = res->ndim == x->ndim && res->shape[res->ndim - 1] == w->shape[0];
        for (int i = 0; ok && i < x->ndim - 1; i++) ok = res->shape[i] == x->shape[i];
    }
    if (ok) return 1;
    char s0[96], s1[96], s2[96] = "none", s3[96] = "none";
    er_fail(ER_INPUT, "%s: input %s, weight %s, bias %s, residual %s: need [..., in], [out, in], [out], [..., out]", op,
            ops_shape(x, s0), ops_shape(w, s1), bias ? ops_shape(bias, s2) : s2, res ? ops_shape(res, s3) : s3);
    return 0;
}

tensor *op_linear_to(tensor *x, tensor *w, tensor *bias, int dtype) {
    OPS_F32("linear", w, bias); /* x fp32 or bf16 (ops_linear_bf16.c) */
    if (!x || !w) return NULL;
    if (dtype != x->dtype && !(x->dtype == DT_BF16 && dtype == DT_F32)) {
        er_fail(ER_INPUT, "linear: a %s input gives a %s output, not %s", er_dtype_name(x->dtype),
                er_dtype_name(x->dtype), er_dtype_name(dtype));
        return NULL;
    }
    if (!linear_shapes_ok("linear", x, w, bias, NULL)) return NULL;
    if (x->ndim == 1) return op_squeeze(linear_fused(op_unsqueeze(op_contiguous(x), 0), w, bias, NULL, dtype), 0);
    return linear_fused(op_contiguous(x), w, bias, NULL, dtype);
}

tensor *op_linear(tensor *x, tensor *w, tensor *bias) { return op_linear_to(x, w, bias, x ? x->dtype : DT_F32); }

tensor *op_linear_add(tensor *x, tensor *w, tensor *bias, tensor *res) {
    OPS_F32("linear_add", w, bias, res); /* x fp32 or bf16; the residual stream fp32 */
    if (!x || !w || !res) return NULL;
    if (!linear_shapes_ok("linear_add", x, w, bias, res)) return NULL;
    return linear_fused(op_contiguous(x), w, bias, op_contiguous(res), DT_F32);
}
