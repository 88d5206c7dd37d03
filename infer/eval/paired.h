/* paired.h — is encoder A better than encoder B on the same queries?
 *   uAP:   paired bootstrap: each replicate draws the queries with replacement once and scores
 *          both A and B on that draw; the interval of uAP(A) - uAP(B) is the 2.5th..97.5th
 *          percentile of the replicate differences, the two-sided p-value
 *          min(1, 2 min(#{d <= 0}, #{d >= 0}) / replicates).
 *   Acc@1: exact McNemar test on the queries that one encoder gets right at rank 1 and the other
 *          not (b = A only, c = B only): p = min(1, 2 P[Bin(b + c, 1/2) <= min(b, c)]), which is
 *          scipy.stats.binomtest(b, b + c, 0.5).pvalue. */
#ifndef ENDORET_PAIRED_H
#define ENDORET_PAIRED_H

#include "infer/eval/metrics.h"

typedef struct {
    int nq, replicates;
    double uap_a, uap_b, delta_lo, delta_hi, p_uap;
    double acc1_a, acc1_b, p_mcnemar;
    int a_only, b_only, both, neither;
} reid_paired;

/* exact two-sided McNemar p-value (1 when b + c = 0) */
double mcnemar_exact_p(int b, int c);
/* two-sided paired-bootstrap p-value of replicate differences d[0..m-1] */
double paired_bootstrap_p(const double *d, int m);
/* hit[t] = 1 when ground-truth pair t's reference is ranked first by its query (ties pessimistic,
 * as reid_metrics's Acc@1) */
void reid_top1_hits(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, uint8_t *hit);
/* A and B must hold the same ground truth (same queries, same true references): ER_INPUT else. */
int reid_paired_test(const reid_pred *pa, int64_t npa, const reid_pred *pb, int64_t npb, const reid_gt *gt_a,
                     int64_t ngt_a, const reid_gt *gt_b, int64_t ngt_b, int B, uint64_t seed, reid_paired *out);

#endif
