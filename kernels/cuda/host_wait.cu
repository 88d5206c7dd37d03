/* host_wait.cu — where the host waits for the device, and the upload path that spares it a wait.
 *
 * Every wait of the host for the stream goes through cuda_wait(), which counts it: the table's
 * host_waits() lets `bench train --profile` and the tests say how often a training step stops the
 * host from running ahead of the device (one wait a step is the goal: the step's record, read at
 * its end; train/step_record.h).
 *
 * The table's `upload` takes pageable host memory and returns with the caller's buffer free again.
 * cudaMemcpyAsync from pageable memory may wait for the stream before it stages the copy (CUDA's
 * "API synchronization behavior"), so small uploads (index lists, masks, the few bytes of a kernel's
 * argument arrays) are copied into a page-locked ring here and enqueued from there: no wait. The ring
 * has RING_SEGS segments; an event recorded when a segment is left says when its copies have run, and
 * is waited for (rarely: a whole ring of uploads later) before the segment is written again. Larger
 * uploads wait as before. */
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "kernels/cuda/cuda_common.h"

#define RING_SEG_BYTES ((size_t)4 << 20)
#define RING_SEGS 8

static std::atomic<unsigned long long> g_waits{0};
static std::mutex g_ring_mu;
static char *g_ring = NULL;                 /* RING_SEGS * RING_SEG_BYTES page-locked bytes */
static cudaEvent_t g_ring_ev[RING_SEGS];    /* recorded when the segment was left */
static int g_ring_used[RING_SEGS];          /* the event has been recorded at least once */
static int g_seg = 0;
static size_t g_head = 0;                   /* offset in the current segment */
static int g_ring_broken = 0;               /* allocation failed: every upload waits */

cudaError_t cuda_wait(void) {
    g_waits.fetch_add(1, std::memory_order_relaxed);
    return cudaStreamSynchronize(cuda_stream());
}

unsigned long long cuda_host_waits(void) { return g_waits.load(std::memory_order_relaxed); }

static int ring_open(void) {
    if (g_ring) return 1;
    if (g_ring_broken) return 0;
    if (cudaMallocHost((void **)&g_ring, (size_t)RING_SEGS * RING_SEG_BYTES) != cudaSuccess) {
        cudaGetLastError();
        g_ring = NULL;
        g_ring_broken = 1;
        return 0;
    }
    for (int s = 0; s < RING_SEGS; s++) {
        if (CUDA_CHECK(cudaEventCreateWithFlags(&g_ring_ev[s], cudaEventDisableTiming))) {
            for (int t = 0; t < s; t++) cudaEventDestroy(g_ring_ev[t]);
            cudaFreeHost(g_ring);
            g_ring = NULL;
            g_ring_broken = 1;
            return 0;
        }
        g_ring_used[s] = 0;
    }
    g_seg = 0;
    g_head = 0;
    return 1;
}

/* The device is closing (set_device): its queued copies finish first (the caller waited). */
void cuda_upload_ring_close(void) {
    std::lock_guard<std::mutex> lk(g_ring_mu);
    if (!g_ring) { g_ring_broken = 0; return; }
    for (int s = 0; s < RING_SEGS; s++) cudaEventDestroy(g_ring_ev[s]);
    cudaFreeHost(g_ring);
    g_ring = NULL;
    g_ring_broken = 0;
}

/* Enqueue a copy of `bytes` host bytes to dst with the caller's buffer free on return. */
void cuda_upload_staged(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    const size_t need = (bytes + 63) & ~(size_t)63;
    {
        std::lock_guard<std::mutex> lk(g_ring_mu);
        if (need <= RING_SEG_BYTES && ring_open()) {
            if (g_head + need > RING_SEG_BYTES) { /* leave this segment, enter the next */
                if (CUDA_CHECK(cudaEventRecord(g_ring_ev[g_seg], cuda_stream()))) return;
                g_ring_used[g_seg] = 1;
                g_seg = (g_seg + 1) % RING_SEGS;
                g_head = 0;
                if (g_ring_used[g_seg]) {
                    cudaError_t q = cudaEventQuery(g_ring_ev[g_seg]);
                    if (q == cudaErrorNotReady) {
                        g_waits.fetch_add(1, std::memory_order_relaxed);
                        q = cudaEventSynchronize(g_ring_ev[g_seg]);
                    }
                    if (CUDA_CHECK(q)) return;
                }
            }
            char *stage = g_ring + (size_t)g_seg * RING_SEG_BYTES + g_head;
            memcpy(stage, src, bytes);
            g_head += need;
            CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, cuda_stream()));
            return;
        }
    }
    if (!CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_stream()))) CUDA_CHECK(cuda_wait());
}
