/* bootstrap.h — 95 % percentile-bootstrap intervals of the ISC2021 re-ID metrics over queries.
 * A replicate draws the queries (every query id among the predictions and the ground truth)
 * with replacement, each drawn copy keeping its own predictions and ground-truth pairs, and
 * recomputes reid_metrics; the interval is the 2.5th and 97.5th percentile of the replicates
 * (numpy.percentile's linear interpolation). Draws are Philox(seed): the same seed, the same
 * interval. */
#ifndef ENDORET_BOOTSTRAP_H
#define ENDORET_BOOTSTRAP_H

#include "infer/eval/metrics.h"

#define BOOTSTRAP_DEFAULT_N 1000
/* the most replicates a command accepts (--bootstrap): each keeps a value per replicate, and 1e9
 * of them only grew memory for an interval that 1e5 already pins to 3 decimals */
#define BOOTSTRAP_MAX_N 100000
#define BOOTSTRAP_SEED 19

typedef struct { reid_result lo, hi; int replicates; } reid_interval;

/* q-th percentile (0..100) of v[0..n-1] (sorted in place), numpy's default (linear) method. */
double percentile_linear(double *v, int n, double q);

/* Queries grouped: query t has predictions p[pstart[t] .. pstart[t+1]) and ground truth
 * gt[gstart[t] .. gstart[t+1]). Built by reid_group_queries (arrays malloc'd, free with free()). */
typedef struct {
    int nq;
    reid_pred *p; int64_t *pstart;
    reid_gt *gt; int64_t *gstart;
    int64_t *qid; /* the original id of query t */
} reid_queries;
void reid_group_queries(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, reid_queries *out);
void reid_queries_free(reid_queries *q);
/* reid_metrics of a resample: draw[t] = the query in slot t (renumbered t so copies differ).
 * ER_INPUT (no message) when the drawn queries hold no ground-truth pair. */
int reid_metrics_of_draw(const reid_queries *q, const int *draw, int n, reid_result *out);

/* 95 % interval of the mean of v[0..n-1] (one value per query or item) over B resamples of the
 * items, the same draws as reid_bootstrap for the same seed and n; B = 0 or n = 0: NaN. */
void bootstrap_mean_interval(const double *v, int n, int B, uint64_t seed, double *lo, double *hi);

/* B replicates (B >= 1; B = 0 fills lo = hi = NaN). */
int reid_bootstrap(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, int B, uint64_t seed, reid_interval *out);

#endif
