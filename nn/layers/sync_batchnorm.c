/* sync_batchnorm.c — batch norm with statistics over every rank's rows (sync_batchnorm.h). */
#include "nn/layers/sync_batchnorm.h"

#include <stdlib.h>

#include "nn/autograd.h"
#include "nn/base/base.h"
#include "nn/base/process_group.h"
#include "nn/ops.h"

/* per-channel sum of t [N, C, H, W] over every rank's rows -> [1, C, 1, 1] */
static tensor *global_channel_sum(tensor *t) {
    int64_t N = t->shape[0], C = t->shape[1], HW = t->shape[2] * t->shape[3];
    tensor *s = op_sum(op_sum(op_reshape(t, 3, SHAPE(N, C, HW)), 2, 0), 0, 1); /* [1, C] */
    s = op_sum(op_allgather_rows(s), 0, 1);                                    /* [1, C], all ranks */
    return op_reshape(s, 4, SHAPE(1, C, 1, 1));
}

tensor *sync_batchnorm2d_composed(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var,
                                  float momentum, float eps, int relu) {
    if (!x) return NULL;
    if (x->ndim != 4) {
        er_fail(ER_INPUT, "sync_batchnorm2d: need [N, C, H, W]");
        return NULL;
    }
    int64_t C = x->shape[1];
    double M = (double)x->shape[0] * x->shape[2] * x->shape[3]; /* rows x positions of this rank */
    if (pg_size() > 1 && pg_allreduce_sum_f64(&M, 1)) return NULL;
    tensor *mean = op_mul_scalar(global_channel_sum(x), (float)(1.0 / M));
    tensor *xc = op_sub(x, mean);
    tensor *var = op_mul_scalar(global_channel_sum(op_mul(xc, xc)), (float)(1.0 / M));
    tensor *y = op_mul(xc, op_pow(op_add_scalar(var, eps), -0.5f));
    if (w) y = op_mul(y, op_reshape(w, 4, SHAPE(1, C, 1, 1)));
    if (b) y = op_add(y, op_reshape(b, 4, SHAPE(1, C, 1, 1)));
    if (!y) return NULL;
    if (running_mean && running_var) { /* global statistics, unbiased variance (torch) */
        float *h = xmalloc(sizeof(float) * 4 * C), *mh = h, *vh = h + C, *rm = h + 2 * C, *rv = h + 3 * C;
        tensor_to_host(mean, mh);
        tensor_to_host(var, vh);
        tensor_to_host(running_mean, rm);
        tensor_to_host(running_var, rv);
        double unbias = M > 1 ? M / (M - 1) : 1;
        for (int64_t c = 0; c < C; c++) {
            rm[c] = (1 - momentum) * rm[c] + momentum * mh[c];
            rv[c] = (float)((1 - momentum) * rv[c] + momentum * vh[c] * unbias);
        }
        const er_backend *be = backend_get(running_mean->device);
        be->upload(running_mean->data, rm, sizeof(float) * C);
        be->upload(running_var->data, rv, sizeof(float) * C);
        free(h);
    }
    return relu ? op_relu(y) : y;
}

tensor *sync_batchnorm2d(tensor *x, tensor *w, tensor *b, tensor *running_mean, tensor *running_var, int training,
                         float momentum, float eps, int relu) {
    if (training && pg_size() > 1)
        return sync_batchnorm2d_composed(x, w, b, running_mean, running_var, momentum, eps, relu);
    return (relu ? op_batchnorm2d_relu : op_batchnorm2d)(x, w, b, running_mean, running_var, training, momentum, eps);
}
