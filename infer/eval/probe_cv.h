/* probe_cv.h — the supervised baseline next to the kNN diagnosis (EndoFinder-Scene Table 5): a
 * linear probe (multinomial logistic regression on the frozen descriptors) under the same k-fold
 * cross-validation as knn_cv (same fold assignment for the same seed), so the two rows compare the
 * classifier, not the split.
 *
 * Per fold: features standardised with the training fold's mean and standard deviation; weights W
 * [C, dim] and bias b [C] minimise  mean_i -log softmax(W x_i + b)[y_i] + (l2 / 2) ||W||^2  by
 * full-batch gradient descent with Adam (lr 0.05, 300 iterations, from zero: deterministic). */
#ifndef ENDORET_PROBE_CV_H
#define ENDORET_PROBE_CV_H

#include <stdint.h>

/* Loss of (W, b) on n standardised rows, and its gradient into gW [C*dim], gb [C] (may be NULL). */
double probe_loss(const float *x, const int *label, int n, int dim, int nclass, const double *W, const double *b,
                  double l2, double *gW, double *gb);
/* pred (n), score (n x nclass: the softmax probabilities) and fold (n) for every labelled item;
 * group (NULL = stratified folds) as knn_cv. */
int probe_cv(const float *x, int n, int dim, const int *label, const int *group, int nclass, int folds, uint64_t seed,
             double l2, int *pred, double *score, int *fold);

/* Train / test: a probe fitted on the rows of tr with ytr >= 0 (standardised with their statistics),
 * pred [nte] and score [nte, nclass] (may be NULL) for the rows of te (infer/eval/split_eval.h). */
int probe_split(const float *tr, const int *ytr, int ntr, const float *te, int nte, int dim, int nclass, double l2,
                int *pred, double *score);

#endif
