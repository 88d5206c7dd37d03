/* topk.c — max-heaps of k (distance, id) entries; ties are broken by the smaller id. */
#include "infer/retrieval/topk.h"

#include <stdlib.h>

#define HEAP_IMPL(PFX, ENT, DT, LESS)                                                         \
    void PFX##_init(PFX##_heap *h, ENT *e, int k) { h->k = k; h->n = 0; h->e = e; }           \
    static void PFX##_sift_down(ENT *e, int n, int i) {                                       \
        for (;;) {                                                                            \
            int l = 2 * i + 1, r = l + 1, m = i;                                              \
            if (l < n && LESS(e[m].d, e[m].id, e[l].d, e[l].id)) m = l;                       \
            if (r < n && LESS(e[m].d, e[m].id, e[r].d, e[r].id)) m = r;                       \
            if (m == i) return;                                                               \
            ENT t = e[i]; e[i] = e[m]; e[m] = t; i = m;                                       \
        }                                                                                     \
    }                                                                                         \
    void PFX##_push(PFX##_heap *h, DT d, int64_t id) {                                        \
        if (h->k <= 0) return;                                                                \
        if (h->n < h->k) {                                                                    \
            int i = h->n++;                                                                   \
            h->e[i].d = d; h->e[i].id = id;                                                   \
            while (i > 0) {                                                                   \
                int p = (i - 1) / 2;                                                          \
                if (!LESS(h->e[p].d, h->e[p].id, h->e[i].d, h->e[i].id)) break;               \
                ENT t = h->e[i]; h->e[i] = h->e[p]; h->e[p] = t; i = p;                       \
            }                                                                                 \
        } else if (LESS(d, id, h->e[0].d, h->e[0].id)) {                                      \
            h->e[0].d = d; h->e[0].id = id;                                                   \
            PFX##_sift_down(h->e, h->n, 0);                                                   \
        }                                                                                     \
    }                                                                                         \
    int PFX##_finish(PFX##_heap *h) {                                                         \
        /* heap sort in place: repeatedly move the max to the end */                          \
        for (int n = h->n; n > 1; n--) {                                                      \
            ENT t = h->e[0]; h->e[0] = h->e[n - 1]; h->e[n - 1] = t;                          \
            PFX##_sift_down(h->e, n - 1, 0);                                                  \
        }                                                                                     \
        return h->n;                                                                          \
    }

HEAP_IMPL(topk, topk_ent, int32_t, topk_less)
HEAP_IMPL(topkf, topkf_ent, float, topkf_less)

int topk_finish_row(topk_heap *h, int64_t *ids, int32_t *d) {
    int c = topk_finish(h);
    for (int j = 0; j < h->k; j++) {
        ids[j] = j < c ? h->e[j].id : -1;
        d[j] = j < c ? h->e[j].d : -1;
    }
    return c;
}
