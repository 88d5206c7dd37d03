/* retrieval_loo.c — leave-one-out labelled retrieval metrics (retrieval_loo.h). */
#include "infer/eval/retrieval_loo.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/metrics.h"
#include "nn/base/base.h"

typedef struct { double s; int j; } scored;

static int by_score(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->s != y->s) return x->s > y->s ? -1 : 1;
    return x->j - y->j;
}

int retrieval_loo(const float *E, const int *labels, int n, int D, retrieval_scores *all, int nclass,
                  retrieval_scores *per_class) {
    double *U = xmalloc((size_t)n * D * sizeof(double));
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += (double)E[(size_t)i * D + d] * E[(size_t)i * D + d];
        s = s > 0 ? 1 / sqrt(s) : 0;
        for (int d = 0; d < D; d++) U[(size_t)i * D + d] = E[(size_t)i * D + d] * s;
    }
    memset(all, 0, sizeof *all);
    if (per_class) memset(per_class, 0, sizeof *per_class * (size_t)nclass);
    scored *row = xmalloc(sizeof *row * (size_t)(n > 1 ? n : 1));
    uint8_t *rel = xmalloc((size_t)(n > 1 ? n : 1));
    for (int i = 0; i < n; i++) {
        if (labels[i] < 0) continue;
        int64_t nrel = 0;
        int m = 0;
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            double s = 0;
            for (int d = 0; d < D; d++) s += U[(size_t)i * D + d] * U[(size_t)j * D + d];
            row[m].s = s;
            row[m++].j = j;
            nrel += labels[j] == labels[i];
        }
        if (!nrel) continue;
        qsort(row, (size_t)m, sizeof *row, by_score);
        for (int r = 0; r < m; r++) rel[r] = labels[row[r].j] == labels[i];
        double ap = ap_ranked(rel, m, nrel, 0);
        int h1 = hit_at_k(rel, m, 1), h5 = hit_at_k(rel, m, 5);
        all->queries++; all->map += ap; all->recall1 += h1; all->recall5 += h5;
        if (per_class && labels[i] < nclass) {
            retrieval_scores *c = &per_class[labels[i]];
            c->queries++; c->map += ap; c->recall1 += h1; c->recall5 += h5;
        }
    }
    free(row);
    free(rel);
    free(U);
    for (int c = -1; c < (per_class ? nclass : 0); c++) {
        retrieval_scores *s = c < 0 ? all : &per_class[c];
        if (s->queries) { s->map /= s->queries; s->recall1 /= s->queries; s->recall5 /= s->queries; }
    }
    if (!all->queries) return er_fail(ER_INPUT, "retrieval: no query has another item of its class");
    return ER_OK;
}
