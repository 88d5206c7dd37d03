/* ops_distributed.c — the differentiable all-gather of rows across the ranks of a data-parallel run.
 * Data goes through host memory (nn/base/process_group.h); the rows are a batch of descriptors
 * (N x d floats), small next to the gradient all-reduce. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/process_group.h"
#include "nn/ops_util.h"

static void allgather_backward(tape_node *n) {
    tensor *x = n->in[0];
    if (!grad_buf(x)) return;
    int64_t local = tensor_numel(x), all = tensor_numel(n->out);
    float *g = xmalloc((size_t)all * sizeof(float));
    backend_get(x->device)->download(g, n->out->grad->data, (size_t)all * sizeof(float));
    /* every rank's loss may depend on every row: the gradient of my rows is the sum over ranks */
    if (pg_allreduce_sum(g, all) != ER_OK) { /* a backward cannot return an error: end the job */
        fprintf(stderr, "endoret: %s\n", er_msg());
        pg_abort(1);
    }
    float *mine = ops_scratch(x->device, local);
    backend_get(x->device)->upload(mine, g + (size_t)pg_rank() * local, (size_t)local * sizeof(float));
    free(g);
    ops_accum(x, mine);
}

tensor *op_allgather_rows(tensor *x) {
    OPS_F32("allgather_rows", x);
    if (!x || pg_size() == 1) return x;
    x = op_contiguous(x);
    int64_t local = tensor_numel(x), sh[T_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[0] *= pg_size();
    float *send = xmalloc((size_t)local * sizeof(float)), *recv = xmalloc((size_t)local * pg_size() * sizeof(float));
    tensor_to_host(x, send);
    tensor *y = pg_allgather(send, local, recv) == ER_OK ? tensor_upload(x->device, x->ndim, sh, recv) : NULL;
    free(send);
    free(recv);
    if (y) tape_record("allgather_rows", allgather_backward, y, 1, &x);
    return y;
}
