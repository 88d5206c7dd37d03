/* split_eval.h — classification on a labelled train / test split of frozen descriptors (PGCon's
 * tables, spec pgcon_dual_vss.md 1.9, 1.10), next to the k-fold protocols of knn_cv.h / probe_cv.h:
 *   - weighted kNN (InstDisc): the test rows against the training rows by cosine, the k nearest
 *     vote with exp(sim / tau) (k 290, tau 0.1) or by majority;
 *   - linear probe: multinomial logistic regression on the standardised training rows
 *     (probe_cv.h's fit), evaluated on the test rows;
 *   - few-label regimes: a seeded share of the training labels (per class, at least one each);
 *   - alignment and uniformity (Wang & Isola 2020) of unit descriptors:
 *       align   = mean over positive pairs (same group, i < j) of ||x_i - x_j||^2
 *       uniform = log mean over all pairs i < j of exp(-2 ||x_i - x_j||^2)
 * Descriptors are L2-normalised here (copies), so any embedding file can be given. */
#ifndef ENDORET_SPLIT_EVAL_H
#define ENDORET_SPLIT_EVAL_H

#include <stdint.h>

/* pred[nq] for the test rows q; labels < 0 in the bank do not vote. weighted: exp(sim / tau), else
 * majority (ties as knn.h). */
int knn_split(const float *bank, const int *bank_label, int nb, const float *q, int nq, int dim, int nclass, int k,
              int weighted, double tau, int *pred);
/* knn_split's share of the nq queries (labels q_label) whose vote is their label, into *acc. */
int knn_split_accuracy(const float *bank, const int *bank_label, int nb, const float *q, const int *q_label, int nq,
                       int dim, int nclass, int k, int weighted, double tau, double *acc);
/* The probe's train / test form is probe_split in probe_cv.h. */
/* keep[i] = 1 for a seeded share `percent` (0, 100] of each class's rows of label (at least one per
 * class present); rows with label < 0 are never kept. Returns the number kept. */
int label_subset(const int *label, int n, double percent, uint64_t seed, uint8_t *keep);
/* Alignment over pairs sharing group (group < 0: none) and uniformity over all pairs, t = 2.
 * *npos receives the positive pair count (align is NaN when 0). */
void align_uniform(const float *x, int n, int dim, const int *group, double *align, double *uniform, int64_t *npos);

#endif
