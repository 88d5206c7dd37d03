/* bow_cv.h — m x q-fold cross-validation of the Dense-SIFT BoW distance before and after chi2
 * metric learning (paper §5, spec §3.8), grouped by patient:
 *   repeat m times: split the patients into q folds at random; for each fold f
 *     - vocabulary re-learnt (k-means) on the descriptors of the items outside f,
 *     - signatures of every item with that vocabulary,
 *     - margin b and weights w learnt on the scored couples with both items outside f,
 *     - the couples with both items inside f are scored with d_1 (before) and d_w (after);
 *   the test couples of the q folds are pooled, giving one correlation per repetition.
 * Reported: the mean over repetitions of each coefficient and of its jackknife error, and
 * Steiger's test on the mean Kendall tau (r_kh = mean tau between the before/after similarities,
 * n = mean pooled couples). The paper's exact aggregation is unknown (spec open question 9). */
#ifndef ENDORET_BOW_CV_H
#define ENDORET_BOW_CV_H

#include <stdint.h>

#include "infer/perceived/chi2_metric.h"
#include "infer/perceived/dsift.h"
#include "infer/perceived/perceived_likert.h"
#include "infer/perceived/perceived_stats.h"

typedef struct {
    int m, q, k, max_desc, iters;
    uint64_t seed;
    chi2_cfg metric; /* b is recomputed per fold */
    int verbose;
} bow_cv_cfg;

typedef struct {
    corr_summary before, after; /* means over repetitions */
    double tau_between;         /* mean tau between before/after similarities */
    double n_test;              /* mean pooled test couples per repetition */
    corr_ztest steiger;         /* after > before, on Kendall tau */
    int reps_used;
} bow_cv_result;

/* desc[i]/ndesc[i]: the descriptors of item i (row i = the id of the item in the ground truth);
 * patient[i] >= 0. ER_INPUT if the ground truth names an item outside 0..n-1 or a repetition has
 * no test couple. */
int bow_cv_run(float *const *desc, const int *ndesc, const int64_t *patient, int n, const likert_gt *gt,
               const dsift_cfg *sift, const bow_cv_cfg *cfg, bow_cv_result *res);

#endif
