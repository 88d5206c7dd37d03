/* kfold.c — stratified and grouped k-fold assignment (see kfold.h). */
#include "datasets/kfold.h"

#include <stdlib.h>

#include "nn/base/base.h"
#include "nn/base/rng.h"

int kfold_stratified(const int *labels, int n, int k, uint64_t seed, int *fold) {
    if (k < 2 || k > n) return er_fail(ER_INPUT, "k-fold: need 2 <= k <= number of items (k=%d, n=%d)", k, n);
    int maxl = -1;
    for (int i = 0; i < n; i++)
        if (labels[i] > maxl) maxl = labels[i];
    int *idx = xmalloc(sizeof(int) * n);
    int next = 0;
    for (int lab = -1; lab <= maxl; lab++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if ((labels[i] < 0 ? -1 : labels[i]) == lab) idx[m++] = i;
        if (!m) continue;
        rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 0x6b66u, (uint32_t)(lab + 1)));
        rng_shuffle(&r, idx, m);
        for (int j = 0; j < m; j++) fold[idx[j]] = next++ % k;
    }
    free(idx);
    return ER_OK;
}

typedef struct {
    int id, size, order;
} group_info;

static int by_size_desc(const void *a, const void *b) {
    const group_info *x = a, *y = b;
    if (x->size != y->size) return y->size - x->size;
    return x->order - y->order;
}

int kfold_grouped(const int *groups, int n, int k, uint64_t seed, int *fold) {
    if (k < 2 || k > n) return er_fail(ER_INPUT, "k-fold: need 2 <= k <= number of items (k=%d, n=%d)", k, n);
    int maxg = -1;
    for (int i = 0; i < n; i++)
        if (groups[i] > maxg) maxg = groups[i];
    int ng = maxg + 1, nsingle = 0;
    for (int i = 0; i < n; i++) nsingle += groups[i] < 0;
    int total = ng + nsingle;
    /* group id for item i: groups[i], or ng + (index among unknowns) */
    int *gid = xmalloc(sizeof(int) * n);
    group_info *g = xcalloc(total ? total : 1, sizeof(group_info));
    for (int i = 0, u = 0; i < n; i++) {
        gid[i] = groups[i] >= 0 ? groups[i] : ng + u++;
        g[gid[i]].size++;
    }
    int *perm = xmalloc(sizeof(int) * (total ? total : 1));
    for (int j = 0; j < total; j++) perm[j] = j;
    rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 0x6b67u, 0));
    rng_shuffle(&r, perm, total);
    for (int j = 0; j < total; j++) g[perm[j]].id = perm[j], g[perm[j]].order = j;
    qsort(g, total, sizeof *g, by_size_desc);
    int *gfold = xmalloc(sizeof(int) * (total ? total : 1));
    int *load = xcalloc(k, sizeof(int));
    int placed = 0;
    for (int j = 0; j < total; j++) {
        if (!g[j].size) continue;
        int best = 0;
        for (int f = 1; f < k; f++)
            if (load[f] < load[best]) best = f;
        gfold[g[j].id] = best;
        load[best] += g[j].size;
        placed++;
    }
    int rc = ER_OK;
    if (placed < k) rc = er_fail(ER_INPUT, "grouped k-fold: only %d groups for k=%d folds", placed, k);
    for (int i = 0; i < n; i++) fold[i] = gfold[gid[i]];
    free(gid), free(g), free(perm), free(gfold), free(load);
    return rc;
}
