/* swiglu.c — silu(x1) * x2 over the two halves of the last axis. */
#include "nn/layers/swiglu.h"

#include "nn/base/base.h"
#include "nn/ops.h"

tensor *swiglu_gate(tensor *h) {
    if (!h) return NULL;
    int64_t n = h->shape[h->ndim - 1];
    if (n % 2) {
        er_fail(ER_INPUT, "swiglu: last dim %lld is odd (expected the packed [x1, x2] of 2H values)", (long long)n);
        return NULL;
    }
    tensor *x1 = op_contiguous(op_slice(h, -1, 0, n / 2)), *x2 = op_contiguous(op_slice(h, -1, n / 2, n));
    return op_mul(op_mul(x1, op_sigmoid(x1)), x2);
}
