/* host_batch.c — see host_batch.h. Two slots, a worker, and which micro-batch the spare one holds. */
#include "train/host_batch.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/profile.h"
#include "nn/base/base.h"
#include "train/epoch_order.h"
#include "train/loop_keys.h"
#include "train/prefetch.h"

struct host_batch {
    int device, pinned, threads, accum;
    fill_scratch scratch;
    epoch_order order;
    uint64_t seed;
    size_t bytes;
    void *slot[2];       /* slot[0]: the current micro-batch, slot[1]: the worker's */
    host_batch_fill_fn fill;
    void *self;
    prefetch *pf;        /* NULL: prefetch off */
    int64_t spare_g;     /* the micro-batch slot[1] holds or is being filled with (-1: none) */
    int spare_rc;
    char spare_msg[512];
};

size_t host_batch_reserve(size_t *at, size_t n) {
    size_t off = (*at + 63) & ~(size_t)63;
    *at = off + n;
    return off;
}

static void *slot_alloc(host_batch *hb) {
    if (hb->pinned) return backend_get(hb->device)->host_alloc(hb->bytes);
    return xcalloc(1, hb->bytes);
}

host_batch *host_batch_new(const train_run *run, int items, size_t bytes, host_batch_fill_fn fill, void *self) {
    host_batch *hb = xcalloc(1, sizeof *hb);
    epoch_order_init(&hb->order, items);
    hb->seed = (uint64_t)run->keys->seed;
    hb->device = run->device;
    hb->accum = run->keys->accum;
    hb->bytes = bytes ? bytes : 1;
    hb->fill = fill;
    hb->self = self;
    hb->spare_g = -1;
    hb->threads = run->threads > 0 ? run->threads : 1;
    hb->scratch.ws = xcalloc(hb->threads, sizeof(aug_workspace));
    hb->scratch.src = xcalloc(hb->threads, sizeof(image));
    hb->scratch.mask = xcalloc(hb->threads, sizeof(image));
    const er_backend *be = backend_get(run->device);
    /* page-locked on a device: the per-step upload is asynchronous */
    hb->pinned = run->device != DEV_CPU && be && be->host_alloc;
    hb->slot[0] = slot_alloc(hb);
    if (hb->pinned && !hb->slot[0]) { /* no page-locked memory: plain copies */
        hb->pinned = 0;
        hb->slot[0] = slot_alloc(hb);
    }
    if (run->prefetch) {
        hb->slot[1] = slot_alloc(hb);
        if (!hb->slot[1] || !(hb->pf = prefetch_new())) {
            if (hb->slot[1]) er_fail(ER_RUNTIME, "data.prefetch: cannot start the worker thread");
            else er_fail(ER_RUNTIME, "data.prefetch: no page-locked buffer for the second batch");
            host_batch_free(hb);
            return NULL;
        }
    }
    return hb;
}

static void fill_spare(void *arg) {
    host_batch *hb = arg;
    hb->spare_rc = hb->fill(hb->self, hb->spare_g, hb->slot[1], &hb->scratch);
    if (hb->spare_rc) snprintf(hb->spare_msg, sizeof hb->spare_msg, "%s", er_msg());
}

void *host_batch_get(host_batch *hb, int64_t g) {
    int rc;
    if (hb->pf) prefetch_wait(hb->pf);
    if (hb->pf && hb->spare_g == g) { /* the worker filled this one during the last step */
        void *t = hb->slot[0];
        hb->slot[0] = hb->slot[1];
        hb->slot[1] = t;
        rc = hb->spare_rc;
        if (rc) er_fail(rc, "%s", hb->spare_msg);
    } else {
        rc = hb->fill(hb->self, g, hb->slot[0], &hb->scratch);
    }
    hb->spare_g = -1;
    if (rc) return NULL;
    if (hb->pf) { /* the next micro-batch, while the device runs this one; slot[1]'s last upload has
                   * finished: the loop read the last step's loss, which waits for the stream */
        hb->spare_g = g + 1;
        prefetch_run(hb->pf, fill_spare, hb);
    }
    return hb->slot[0];
}

tensor *host_upload_pinned(int device, const void *src, int ndim, const int64_t *shape) {
    tensor *t = tensor_empty(device, ndim, shape);
    if (t) backend_get(device)->upload_async(t->data, src, (size_t)tensor_numel(t) * sizeof(float));
    return t;
}

tensor *host_batch_upload(host_batch *hb, const void *slot, size_t off, int ndim, const int64_t *shape) {
    if (hb->pinned) return host_upload_pinned(hb->device, (const char *)slot + off, ndim, shape);
    tensor *t = tensor_empty(hb->device, ndim, shape);
    if (t) backend_get(hb->device)->upload(t->data, (const char *)slot + off, (size_t)tensor_numel(t) * sizeof(float));
    return t;
}

void *host_batch_step(host_batch *hb, int64_t step, int micro, tensor **images, int ndim, const int64_t *shape) {
    int phase = prof_phase(PROF_DATA);
    void *slot = host_batch_get(hb, step * hb->accum + micro);
    if (slot && images && !(*images = host_batch_upload(hb, slot, 0, ndim, shape))) slot = NULL;
    prof_phase(phase);
    return slot;
}

const fill_scratch *host_batch_scratch(const host_batch *hb) { return &hb->scratch; }

int host_batch_item(host_batch *hb, int64_t i) { return epoch_order_at(&hb->order, hb->seed, i); }

void host_batch_free(host_batch *hb) {
    if (!hb) return;
    prefetch_free(hb->pf); /* waits for a fill still writing slot[1] */
    for (int t = 0; t < hb->threads; t++) {
        aug_workspace_free(&hb->scratch.ws[t]);
        image_free(&hb->scratch.src[t]);
        image_free(&hb->scratch.mask[t]);
    }
    free(hb->scratch.ws);
    free(hb->scratch.src);
    free(hb->scratch.mask);
    epoch_order_free(&hb->order);
    for (int i = 0; i < 2; i++) {
        if (!hb->slot[i]) continue;
        if (hb->pinned) backend_get(hb->device)->host_free(hb->slot[i]);
        else free(hb->slot[i]);
    }
    free(hb);
}
