/* perceived_eval.h — what `endoret eval perceived` measures for one descriptor against the Likert
 * ground truth (spec §3.4-3.5, paper fig. 2-3): pair distances, per-Likert-level distance
 * histograms with Bhattacharyya distances between them, and sparse recall curves. */
#ifndef ENDORET_PERCEIVED_EVAL_H
#define ENDORET_PERCEIVED_EVAL_H

#include <stdint.h>

#include "infer/perceived/perceived_likert.h"

typedef enum { PD_COSINE, PD_HAMMING, PD_CHI2 } pdist_kind;
/* "cosine" | "hamming" | "chi2" -> kind; ER_INPUT naming the value otherwise. */
int pdist_parse(const char *s, pdist_kind *k);
const char *pdist_name(pdist_kind k);

/* Descriptors prepared for a distance: cosine rows are L2-normalised (a zero row stays zero);
 * hamming keeps the sign bits (1 if x > 0); chi2 keeps the values (they must be >= 0).
 * d(i, j): cosine 1 - <x_i, x_j>; hamming the number of differing signs; chi2
 * sum_k (x_ik - x_jk)^2 / (x_ik + x_jk) over bins where the sum is > 0. */
typedef struct {
    pdist_kind kind;
    int n, dim;
    float *x; /* n * dim, owned */
} pdist_set;
int pdist_prepare(pdist_set *p, const float *x, int n, int dim, pdist_kind kind);
double pdist_ij(const pdist_set *p, int i, int j);
void pdist_free(pdist_set *p);

/* Histograms of the distance of each judgement, one per Likert level (-2,-1,+1,+2), on nbins
 * equal bins over [lo, hi] (computed as min/max of the distances when lo >= hi). counts is
 * 4 * nbins. rec_dist[r] = distance of the pair of record r. */
void likert_level_hist(const likert_gt *gt, const double *pair_dist, int nbins, double *lo, double *hi,
                       double *counts);
/* Bhattacharyya distance -ln sum_i sqrt(p_i q_i) between two histograms (normalised here);
 * +inf when they do not overlap, NaN when one is empty. */
double bhattacharyya(const double *p, const double *q, int nbins);

/* Sparse recall (paper §4): for a scored couple (a, b), rank_a(b) = position of b among all items
 * sorted by distance to a (a itself and items of a's group excluded when group != NULL; ties
 * broken by index), and the couple is found at k when min(rank_a(b), rank_b(a)) <= k.
 * Domains: 0 = couples with at least one +2 judgement, 1 = with a +1 judgement, 2 = couples with
 * mean score > 0 (the similar set S). recall is 3 * kmax: recall[d*kmax + k-1]; npos[d] = size of
 * domain d (its curve is NaN when 0). Computed from the ranks of each couple. */
void sparse_recall(const likert_gt *gt, const int *ia, const int *ib, const pdist_set *p, const int64_t *group,
                   int kmax, double *recall, int npos[3]);

/* Sparse recall restricted to the scored candidates (spec §3.4): for a query q, C_q = the items
 * scored with q (other groups only when group != NULL), R_q = those with mean score > 0; C_q is
 * ranked by distance to q (ties by index) and Rec_q(x) = |R_q ∩ top_ceil(x |C_q|)| / |R_q| at the
 * normalised positions x = (t+1)/npts, t = 0..npts-1. The curve is the mean over the queries with
 * R_q non-empty (*nq of them); every couple makes both of its items queries. Returns the area
 * under the curve (mean of the points). */
double sparse_recall_scored(const likert_gt *gt, const int *ia, const int *ib, const pdist_set *p, const int64_t *group,
                            int npts, double *curve, int *nq);

#endif
