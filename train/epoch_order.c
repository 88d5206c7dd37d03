/* epoch_order.c — per-epoch permutations of the training items (epoch_order.h). */
#include "train/epoch_order.h"

#include <stdlib.h>

#include "nn/base/base.h"
#include "nn/base/rng.h"

void epoch_order_init(epoch_order *o, int n) {
    o->n = n;
    o->epoch = -1;
    o->perm = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int));
}

int epoch_order_at(epoch_order *o, uint64_t seed, int64_t i) {
    int64_t epoch = i / o->n;
    if (epoch != o->epoch) {
        for (int k = 0; k < o->n; k++) o->perm[k] = k;
        rng_t r = rng_make(seed, rng_stream(RNG_SHUFFLE, (uint32_t)epoch, 0));
        rng_shuffle(&r, o->perm, o->n);
        o->epoch = epoch;
    }
    return o->perm[i % o->n];
}

void epoch_order_free(epoch_order *o) {
    free(o->perm);
    o->perm = NULL;
}
