/* ops_matmul.c — batched matrix products (either operand transposed) and linear layers.
 * Operands are used in place whenever their last two dims have a unit stride (a transposed view
 * is just the other gemm transpose flag) and their batch dims collapse to one stride. */
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

static void matmul_backward(tape_node *n) {
    tensor *a = n->in[0], *b = n->in[1], *y = n->out;
    int tA = (int)n->i[0], tB = (int)n->i[1], M = (int)n->i[2], N = (int)n->i[3], K = (int)n->i[4];
    int batch = (int)n->i[5];
    matdesc da, db;
    describe(a, batch, &da);
    describe(b, batch, &db);
    int ta = da.trans ^ tA, tb = db.trans ^ tB; /* storage flags of op(A), op(B) */
    const er_backend *be = BE(y);
    const float *gy = y->grad->data;
    long sy = (long)M * N;
    int fresh;
    tensor *ga = grad_buf_fresh(a, &fresh), *gb = grad_buf(b);
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
            be->gemm_batched(0, !tb, M, K, N, 1.0f, gy, N, sy, b->data, db.ld, db.bstride, beta,
                             ga->data, K, sga, batch);
        else /* gA[K,M] += opB dC^T */
            be->gemm_batched(tb, 1, K, M, N, 1.0f, b->data, db.ld, db.bstride, gy, N, sy, beta,
                             ga->data, M, sga, batch);
    }
    if (gb) {
        long sgb = db.bstride ? (long)K * N : 0;
        int nb = sgb ? batch : 1, reps = sgb ? 1 : batch; /* shared b: sum over the batch in turn */
        for (int r = 0; r < reps; r++) {
            const float *ap = a->data + (long)r * da.bstride, *gp = gy + (long)r * sy;
            if (!tB) /* gB[K,N] += opA^T dC */
                be->gemm_batched(!ta, 0, K, N, M, 1.0f, ap, da.ld, da.bstride, gp, N, sy, 1.0f,
                                 gb->data, N, sgb, nb);
            else /* gB[N,K] += dC^T opA */
                be->gemm_batched(1, ta, N, K, M, 1.0f, gp, N, sy, ap, da.ld, da.bstride, 1.0f,
                                 gb->data, K, sgb, nb);
        }
    }
}

tensor *op_matmul(tensor *a, tensor *b, int transA, int transB) {
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
    if (M > 0 && N > 0 && b->packed && batch == 1) /* a frozen weight (tensor_prepack) */
        BE(a)->gemm_prepacked(da.trans ^ transA, db.trans ^ transB, (int)M, (int)N, (int)K, 1.0f,
                              a->data, da.ld, b->data, db.ld, b->packed, 0.0f, y->data, (int)N);
    else if (M > 0 && N > 0)
        BE(a)->gemm_batched(da.trans ^ transA, db.trans ^ transB, (int)M, (int)N, (int)K, 1.0f,
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
    }
    return y;
}

/* Bias added in place to a fresh matmul result; the output is a new struct over the same data
 * whose gradient aliases the matmul's (grad_alias), so only the bias gradient is computed here. */
static void bias_backward(tape_node *n) {
    tensor *b = n->in[1], *gb = grad_buf(b), *y = n->out;
    if (!gb) return;
    int64_t ones[T_MAX_DIMS], N = b->shape[0];
    for (int i = 0; i < y->ndim; i++) ones[i] = 1;
    ones[y->ndim - 1] = N;
    arena_mark m = ops_mark(y->device);
    float *work = ops_scratch(y->device, (int64_t)BE(y)->sum_to_workspace(y->ndim, y->shape, ones));
    BE(y)->sum_to(y->ndim, y->shape, y->grad->data, ones, gb->data, 1, work);
    ops_release(y->device, m);
}

static tensor *add_bias_inplace(tensor *y, tensor *bias) {
    int64_t st[T_MAX_DIMS], bs[T_MAX_DIMS] = {0};
    int64_t acc = 1;
    for (int i = y->ndim - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= y->shape[i];
    }
    bs[y->ndim - 1] = bias->stride[0];
    BE(y)->binary(BIN_ADD, y->ndim, y->shape, y->data, st, bias->data, bs, y->data);
    tensor *z = tensor_view(y, y->ndim, y->shape, st, 0);
    tensor *in[2] = {y, bias};
    tape_node *n = tape_record("bias_add", bias_backward, z, 2, in);
    if (n) n->grad_alias = 1;
    return z;
}

tensor *op_linear(tensor *x, tensor *w, tensor *bias) {
    if (!x || !w) return NULL;
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
        (bias && (bias->ndim != 1 || bias->shape[0] != w->shape[0]))) {
        char s0[96], s1[96], s2[96] = "none";
        er_fail(ER_INPUT, "linear: input %s, weight %s, bias %s: need [..., in], [out, in], [out]",
                ops_shape(x, s0), ops_shape(w, s1), bias ? ops_shape(bias, s2) : s2);
        return NULL;
    }
    tensor *x2 = x->ndim == 1 ? op_unsqueeze(x, 0) : x;
    tensor *y = op_matmul(x2, w, 0, 1);
    if (x->ndim == 1) y = op_squeeze(y, 0);
    return bias && y ? add_bias_inplace(y, bias) : y;
}
