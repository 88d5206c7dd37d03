/* host_batch.h — the double-buffered host batches every objective trains from.
 *
 * An objective fills micro-batch g into a slot of `bytes` (its own layout: images, labels, indices),
 * a pure function of the seed, g and each sample's index, so a run is bit-identical however the
 * slot was filled. The pipeline owns the two slots (page-locked on a GPU, so the step's upload is
 * asynchronous) and, with the run's prefetch on (data.prefetch), fills g + 1 on a worker thread
 * (train/prefetch.h) while the step of g runs. The step must not use the fill's per-thread scratch. */
#ifndef ENDORET_TRAIN_HOST_BATCH_H
#define ENDORET_TRAIN_HOST_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "datasets/augment.h"
#include "datasets/image.h"
#include "nn/tensor.h"
#include "train/loop.h"

/* Per-thread scratch of the fills, run->threads entries each (index: omp_get_thread_num() inside the
 * fill's num_threads(run->threads) loop): augmentation workspaces, decoded sources and masks. Only
 * the fill may use them: it runs on the step's thread or on the worker, never both at once. */
typedef struct {
    aug_workspace *ws;
    image *src, *mask;
} fill_scratch;

/* Fills micro-batch g into slot with the per-thread scratch s; ER_OK, else an er_fail code (its
 * message is kept for the step). */
typedef int (*host_batch_fill_fn)(void *self, int64_t g, void *slot, const fill_scratch *s);

typedef struct host_batch host_batch;

/* A pipeline over `items` training items (the epoch order, host_batch_item) and slots of `bytes`. NULL
 * (error recorded) if the memory or the worker cannot be had. */
host_batch *host_batch_new(const train_run *run, int items, size_t bytes, host_batch_fill_fn fill, void *self);
/* The training item drawn i-th since the start (train/epoch_order.h: every item once per epoch, a
 * permutation of the run's seed and the epoch). For the fill only (it caches the epoch's permutation:
 * call it outside the fill's parallel loop). */
int host_batch_item(host_batch *hb, int64_t i);
/* The slot holding micro-batch g: the worker's when it prefetched g, else filled now; then starts
 * the fill of g + 1 into the other slot when prefetching. NULL + er_fail when the fill failed. The
 * slot stays valid until the next host_batch_get. */
void *host_batch_get(host_batch *hb, int64_t g);
/* The slot of micro-batch `micro` of optimizer step `step` (host_batch_get of step x accum + micro),
 * timed as the data phase (kernels/profile.h); with images: its first floats uploaded as a tensor
 * of `shape` (host_batch_upload), else NULL. NULL + er_fail when the fill or the upload failed. */
void *host_batch_step(host_batch *hb, int64_t step, int micro, tensor **images, int ndim, const int64_t *shape);
/* Bytes [off, off + numel floats) of slot as a new tensor of `shape` on the run's device: an
 * asynchronous copy from page-locked memory (ordered before the step's kernels), else a copy. */
tensor *host_batch_upload(host_batch *hb, const void *slot, size_t off, int ndim, const int64_t *shape);
/* A new fp32 tensor of `shape` on `device` filled from page-locked `src` (the backend's host_alloc) with
 * upload_async: no wait, so `src` must not be written until the stream has passed the copy (the next
 * micro-batch's slot, or a later wait). */
tensor *host_upload_pinned(int device, const void *src, int ndim, const int64_t *shape);
/* The fills' per-thread scratch (owned by hb). */
const fill_scratch *host_batch_scratch(const host_batch *hb);
/* Waits for the worker; NULL is a no-op. */
void host_batch_free(host_batch *hb);

/* Slot layout helper: reserves n bytes at the running offset *at (aligned to 64) and returns the
 * offset where they start. */
size_t host_batch_reserve(size_t *at, size_t n);

#endif
