/* knn_cv.c — cross-validated kNN classification (folds from infer/eval/metrics.h). */
#include "infer/eval/knn_cv.h"

#include <stdlib.h>
#include <string.h>

#include "infer/eval/metrics.h"
#include "nn/base/base.h"

int knn_cv(const float *x, int n, int dim, const int *label, const int *group, int nclass,
           const knn_cv_cfg *cfg_in, int *pred, double *score, int *fold) {
    /* n x k neighbours are allocated: a k beyond the items finds no more of them, so it is cut to n
     * (same votes; k = 1e9 aborted) */
    knn_cv_cfg c = *cfg_in;
    if (c.k > n) c.k = n;
    const knn_cv_cfg *cfg = &c;
    if (cfg->folds < 2) return er_fail(ER_INPUT, "cross-validation needs at least 2 folds (got %d)", cfg->folds);
    if (cfg->folds > n) return er_fail(ER_INPUT, "cross-validation: %d folds for %d items", cfg->folds, n);
    if (cfg->k < 1) return er_fail(ER_INPUT, "kNN: k must be >= 1 (got %d)", cfg->k);
    if (cfg->grouped && group) {
        int rc = folds_grouped(group, n, cfg->folds, cfg->seed, fold);
        if (rc) return rc;
    } else folds_stratified(label, n, cfg->folds, cfg->seed, fold);
    float *db = xmalloc((size_t)n * dim * sizeof *db), *qs = xmalloc((size_t)n * dim * sizeof *qs);
    int *dbrow = xmalloc((size_t)n * sizeof *dbrow), *qrow = xmalloc((size_t)n * sizeof *qrow);
    int64_t *nb = xmalloc((size_t)n * cfg->k * sizeof *nb), *lab = xmalloc((size_t)cfg->k * sizeof *lab);
    double *sim = xmalloc((size_t)n * cfg->k * sizeof *sim);
    int *cnt = xmalloc((size_t)n * sizeof *cnt);
    int rc = ER_OK;
    for (int f = 0; f < cfg->folds && !rc; f++) {
        int ndb = 0, nq = 0;
        for (int i = 0; i < n; i++) {
            if (fold[i] == f) { memcpy(qs + (size_t)nq * dim, x + (size_t)i * dim, dim * sizeof(float)); qrow[nq++] = i; }
            else { memcpy(db + (size_t)ndb * dim, x + (size_t)i * dim, dim * sizeof(float)); dbrow[ndb++] = i; }
        }
        if (!nq) continue;
        rc = knn_neighbours(db, ndb, qs, nq, dim, cfg, nb, sim, cnt);
        for (int a = 0; a < nq && !rc; a++) {
            for (int j = 0; j < cnt[a]; j++) lab[j] = label[dbrow[nb[(size_t)a * cfg->k + j]]];
            int i = qrow[a];
            pred[i] = cfg->weighted ? knn_weighted(lab, sim + (size_t)a * cfg->k, cnt[a], nclass, cfg->tau, score + (size_t)i * nclass)
                                    : knn_majority(lab, cnt[a], nclass, score + (size_t)i * nclass);
        }
    }
    free(db); free(qs); free(dbrow); free(qrow); free(nb); free(lab); free(sim); free(cnt);
    return rc;
}
