/* data_parallel.c — gradient and loss averaging across ranks for the training loop. On a device
 * whose backend has collectives (NCCL on CUDA) the gradients are averaged in device memory. Else
 * they are packed into one host buffer and summed with one MPI all-reduce (one call per step
 * instead of one per tensor), then scaled by 1 / size: the mean over ranks, which is the gradient
 * of the global batch when every rank holds an equal shard. */
#include "train/data_parallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/base.h"
#include "nn/base/config.h"
#include "nn/base/process_group.h"

typedef struct {
    int device;
    int on_device;    /* the backend averages in device memory (NCCL) */
    float *host;      /* the packed gradients (grown as needed) */
    int64_t cap;
} dp_state;

static dp_state dp; /* one loop per process */

static int dp_allreduce(void *ctx, float *const *grads, const int64_t *n, int count) {
    dp_state *s = ctx;
    const er_backend *be = backend_get(s->device);
    if (s->on_device) return be->allreduce_mean(grads, n, count);
    int64_t total = 0;
    for (int i = 0; i < count; i++) total += n[i];
    if (total > s->cap) {
        s->host = xrealloc(s->host, (size_t)total * sizeof(float));
        s->cap = total;
    }
    for (int64_t i = 0, o = 0; i < count; o += n[i], i++) be->download(s->host + o, grads[i], (size_t)n[i] * sizeof(float));
    int rc = pg_allreduce_sum(s->host, total);
    if (rc) return rc;
    const float inv = 1.0f / (float)pg_size();
    for (int64_t k = 0; k < total; k++) s->host[k] *= inv;
    for (int64_t i = 0, o = 0; i < count; o += n[i], i++) be->upload(grads[i], s->host + o, (size_t)n[i] * sizeof(float));
    return ER_OK;
}

static int dp_average(void *ctx, double *v, int n) {
    (void)ctx;
    int rc = pg_allreduce_sum_f64(v, n);
    for (int i = 0; i < n; i++) v[i] /= pg_size();
    return rc;
}

int dp_attach(train_loop_config *lc, int device) {
    if (pg_size() < 2) return ER_OK;
    dp.device = device;
    const er_backend *be = backend_get(device);
    if (device != DEV_CPU && be && be->collective_join && be->allreduce_mean) {
        char id[COLLECTIVE_ID_BYTES] = {0};
        int rc = pg_rank() == 0 ? be->collective_id(id) : ER_OK;
        if (!rc) rc = pg_broadcast(id, sizeof id, 0);
        if (!rc) rc = be->collective_join(id, pg_rank(), pg_size());
        if (rc) return rc;
        dp.on_device = 1;
    }
    lc->rank = pg_rank();
    lc->world_size = pg_size();
    lc->allreduce = dp_allreduce;
    lc->average = dp_average;
    lc->allreduce_ctx = &dp;
    return ER_OK;
}

void dp_pick_device(char **device) {
    if (pg_size() < 2 || !*device || strcmp(*device, "cuda")) return;
    char name[32];
    snprintf(name, sizeof name, "cuda:%d", pg_local_rank());
    cfg_set_str(device, name);
}

void dp_detach(void) {
    free(dp.host);
    memset(&dp, 0, sizeof dp);
}
