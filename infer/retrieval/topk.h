/* topk.h — bounded top-k selection shared by every index, so all of them order results the same
 * way: ascending by (distance, id). Distances are integers (Hamming) or floats (cosine distance);
 * each has its own small max-heap of k entries (the worst kept entry at the root). */
#ifndef ENDORET_TOPK_H
#define ENDORET_TOPK_H

#include <stdint.h>

typedef struct { int32_t d; int64_t id; } topk_ent;   /* integer distance */
typedef struct { float d; int64_t id; } topkf_ent;     /* float distance */

typedef struct { int k, n; topk_ent *e; } topk_heap;
typedef struct { int k, n; topkf_ent *e; } topkf_heap;

static inline int topk_less(int32_t da, int64_t ia, int32_t db, int64_t ib) {
    return da < db || (da == db && ia < ib);
}
static inline int topkf_less(float da, int64_t ia, float db, int64_t ib) {
    return da < db || (da == db && ia < ib);
}

/* e must hold k entries (caller-owned storage, so hot loops do not allocate). */
void topk_init(topk_heap *h, topk_ent *e, int k);
void topk_push(topk_heap *h, int32_t d, int64_t id);
/* Largest distance a new entry may have and still enter (INT32_MAX while not full). A candidate
 * with distance equal to the bound may still enter when its id is smaller. */
static inline int32_t topk_bound(const topk_heap *h) { return h->n < h->k ? INT32_MAX : h->e[0].d; }
/* Sort the kept entries ascending (destroys the heap order); returns the count. */
int topk_finish(topk_heap *h);
/* topk_finish, then write the k result slots of one query (ids / distances, -1 past the count);
 * returns the count. Every Hamming index ends a query with this. */
int topk_finish_row(topk_heap *h, int64_t *ids, int32_t *d);

void topkf_init(topkf_heap *h, topkf_ent *e, int k);
void topkf_push(topkf_heap *h, float d, int64_t id);
static inline float topkf_bound(const topkf_heap *h) { return h->n < h->k ? 3.4e38f : h->e[0].d; }
int topkf_finish(topkf_heap *h);

#endif
