/* ops_loss.c — cross-entropy with integer labels (mean over labelled rows; label < 0 = ignore). */
#include "nn/ops_util.h"

typedef struct {
    int32_t *labels; /* device */
    float *lse;
    int64_t nvalid;
} ce_ctx;

static void ce_backward(tape_node *n) {
    tensor *x = n->in[0], *gx = grad_buf(x);
    if (!gx) return;
    ce_ctx *c = n->ctx;
    int64_t R = x->shape[0], C = x->shape[1];
    /* the loss gradient stays on the device: the kernel divides it by the labelled rows (no host wait) */
    BE(x)->cross_entropy_backward(R, C, x->data, c->labels, c->lse, n->out->grad->data, (float)c->nvalid, gx->data);
}

tensor *op_cross_entropy(tensor *logits, const int32_t *labels) {
    OPS_F32("cross_entropy", logits);
    if (!logits) return NULL;
    if (logits->ndim != 2) {
        char s[96];
        er_fail(ER_INPUT, "cross_entropy: logits %s must be [N, C]", ops_shape(logits, s));
        return NULL;
    }
    int64_t R = logits->shape[0], C = logits->shape[1], nvalid = 0;
    for (int64_t r = 0; r < R; r++) {
        if (labels[r] >= C) {
            er_fail(ER_INPUT, "cross_entropy: label %d of row %lld outside [0, %lld)", labels[r],
                    (long long)r, (long long)C);
            return NULL;
        }
        nvalid += labels[r] >= 0;
    }
    if (nvalid == 0) {
        er_fail(ER_INPUT, "cross_entropy: no row has a label");
        return NULL;
    }
    tensor *x = op_contiguous(logits);
    ce_ctx *c = arena_alloc_host(arena_default(x->device), sizeof *c);
    c->labels = ops_upload_idx(x->device, labels, R);
    c->lse = ops_scratch(x->device, R);
    c->nvalid = nvalid;
    float *rows = ops_scratch(x->device, R);
    BE(x)->cross_entropy(R, C, x->data, c->labels, rows, c->lse);
    tensor *y = tensor_empty(x->device, 0, NULL);
    BE(x)->reduce(RED_SUM, 1, R, 1, rows, y->data, NULL);
    /* the mean over the labelled rows on the device, one IEEE division as the host's was (no wait) */
    const float nv = (float)nvalid;
    float *dnv = ops_scratch(x->device, 1);
    BE(x)->upload(dnv, &nv, sizeof nv);
    const int64_t one = 1;
    BE(x)->binary(BIN_DIV, 1, &one, y->data, &one, dnv, &one, y->data);
    tape_node *n = tape_record("cross_entropy", ce_backward, y, 1, &x);
    if (n) n->ctx = c;
    return y;
}
