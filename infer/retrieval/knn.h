/* knn.h — diagnosis by the labels of the nearest historical cases.
 *   majority  (EndoFinder, k = 6): most frequent label among the k neighbours; a tie between
 *             labels goes to the tied label met first in rank order (so the nearest neighbour's
 *             label wins whenever it is among the tied ones).
 *   weighted  (PGCon / InstDisc, k = 290, tau = 0.1): score_c = sum over neighbours of label c of
 *             exp(sim / tau); the largest score wins (a tie again goes to the label met first).
 * Neighbours with an unknown label (-1) do not vote. `score` (nclass) receives the normalised
 * votes (fractions summing to 1), used for ROC AUC. Returns the predicted label, -1 if none. */
#ifndef ENDORET_KNN_H
#define ENDORET_KNN_H

#include <stdint.h>

#include "infer/retrieval/hash.h"
#include "infer/retrieval/index.h"

int knn_majority(const int64_t *labels, int k, int nclass, double *score);
int knn_weighted(const int64_t *labels, const double *sims, int k, int nclass, double tau, double *score);
/* The default k of a vote, one rule for `classify`, `report` and `serve` (and `eval classify`):
 * 6 for the majority vote (EndoFinder's kNN diagnosis, its Table 5), 290 for the weighted vote
 * (PGCon's kNN evaluation, tau 0.1). */
enum { KNN_DEFAULT_K_MAJORITY = 6, KNN_DEFAULT_K_WEIGHTED = 290 };
static inline int knn_default_k(int weighted) { return weighted ? KNN_DEFAULT_K_WEIGHTED : KNN_DEFAULT_K_MAJORITY; }
/* "majority" -> 0, "weighted" -> 1; anything else ER_INPUT naming --vote. */
int knn_parse_vote(const char *vote, int *weighted);

/* Similarity the weighted vote uses: cosine for floats, 1 - 2H/bits for binary codes (the cosine
 * of the +-1 codes). */
static inline double hamming_similarity(int32_t h, int bits) { return 1.0 - 2.0 * h / bits; }

typedef struct {
    int k;
    int weighted;       /* 0 majority, 1 exp(sim/tau) */
    double tau;
    int bits;           /* 0: float cosine search; > 0: hash to this many bits */
    hash_kind hash;     /* sign when bits == dim, else pca or itq */
    index_kind kind;    /* binary index used when bits > 0 */
    int folds;
    int grouped;        /* group ids given: patient/scene-grouped folds */
    uint64_t seed;
} knn_cv_cfg;

/* Neighbours of nq queries in a database, by float cosine or by hashed codes (hasher fitted on the
 * database rows by the caller); sims in the weighted vote's sense. ids are row indices of db. */
int knn_neighbours(const float *db, int ndb, const float *q, int nq, int dim, const knn_cv_cfg *cfg,
                   int64_t *nb_idx, double *nb_sim, int *count);

#endif
