/* epoch_order.h — the order an objective draws its training items in: every item once per epoch, in
 * a permutation that is a pure function of (seed, epoch) (Philox stream RNG_SHUFFLE), so the i-th item
 * drawn since the start is the same whatever steps ran before in this process (resume is bit-exact). */
#ifndef ENDORET_EPOCH_ORDER_H
#define ENDORET_EPOCH_ORDER_H

#include <stdint.h>

typedef struct {
    int n;
    int64_t epoch;   /* the epoch perm holds, -1 = none yet */
    int *perm;
} epoch_order;

void epoch_order_init(epoch_order *o, int n);
/* The item drawn i-th since the start (0 <= i): perm of epoch i / n at i % n. Not thread-safe (it
 * rebuilds the cached permutation when the epoch changes): call it from one thread, before a parallel
 * loop over the batch. */
int epoch_order_at(epoch_order *o, uint64_t seed, int64_t i);
void epoch_order_free(epoch_order *o);

#endif
