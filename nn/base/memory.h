/* memory.h — how much memory this machine can give a run, and the refusal of a run that will not
 * fit: a training or inference run estimates its footprint before allocating anything and stops
 * with the estimate in the message instead of being OOM-killed half-way (or swapping for hours). */
#ifndef ENDORET_BASE_MEMORY_H
#define ENDORET_BASE_MEMORY_H

#include <stdint.h>

/* One run's estimated footprint, in bytes, by part. */
typedef struct {
    double params;       /* weights and buffers */
    double grads;        /* gradients of the trainable parameters */
    double optimizer;    /* optimizer state (AdamW: 2 moments; SGD: 1 momentum buffer) */
    double activations;  /* what one micro-batch keeps for backward, plus the largest transient */
    double data;         /* input batches, image caches */
} mem_estimate;

double mem_total(const mem_estimate *m);

/* Bytes the process can still use: MemAvailable of /proc/meminfo (falls back to physical memory),
 * or the ENDORET_MEM_LIMIT environment variable (bytes, or with a K/M/G suffix) when set, so tests
 * and shared machines can lower it. */
double mem_available(void);

/* ER_OK when the estimate fits in mem_available(); else ER_INPUT with one message:
 * "<what> needs about 19.3 GiB (weights 0.1, gradients ..., activations 18.9) but this machine has
 * 22.1 GiB available: lower <hint>". */
int mem_check(const mem_estimate *m, const char *what, const char *hint);

#endif
