/* sscd.h — the SSCD contrastive objective used by EndoFinder: a descriptor head on the [CLS] output,
 * L2-normalised, trained with InfoNCE over all positive pairs of the batch plus the differential-
 * entropy (KoLeo) regulariser. (SSCD sscd/train.py::SSCD.loss; EF engine_pretrain.py)
 *
 * With unit embeddings e_i, S = E E^T, P = match matrix (same instance, or shared MixUp/CutMix
 * source; includes i == i), Neg(i) = {k : !P_ik}, Pos(i) = {j != i : P_ij}:
 *   l_ij = exp(S_ij / tau),   p_ij = l_ij / (l_ij + sum_{k in Neg(i)} l_ik + 1e-6)
 *   InfoNCE = (1/N) sum_i sum_{j in Pos(i)} -log p_ij                   (per_anchor_mean = 0)
 *           = mean over anchors with positives of mean_{j in Pos(i)} -log p_ij   (= 1, MixUp mode)
 *   entropy = -mean_i log sqrt(max(2 - 2 max_{k in Neg(i)} S_ik, 1e-6))  (rows without negatives skipped)
 *   loss    = InfoNCE + entropy_weight * entropy
 * sscd_loss runs on the embeddings' device through nn/ops (fp32, autograd); sscd_loss_host is the
 * double-precision host reference the tests compare both with. */
#ifndef ENDORET_SSCD_H
#define ENDORET_SSCD_H

#include <stdint.h>

#include "nn/layers/sscd_head.h"
#include "nn/tensor.h"

typedef struct {
    double infonce, entropy; /* entropy unweighted */
    double total;
    double pos_sim, neg_sim, nn_sim; /* mean positive / negative / nearest-negative similarity */
} sscd_stats;

/* Pure double-precision reference: loss of unit embeddings e [N,d] (host) and, when grad != NULL,
 * dloss/de [N,d] (e treated as free variables). match: N*N bytes (1 = positive or self). */
double sscd_loss_host(const float *e, int N, int d, const uint8_t *match, double tau,
                      double entropy_weight, int per_anchor_mean, double *grad, sscd_stats *st);

/* The differentiable loss: e [N,d] (any device; the L2-normalised descriptors) -> scalar loss on
 * that device. st (may be NULL) receives the terms and similarity statistics (downloads a few
 * scalars and the N x N similarities: logging only). */
tensor *sscd_loss(tensor *e, const uint8_t *match, double tau, double entropy_weight, int per_anchor_mean,
                  sscd_stats *st);

/* The same loss with its logged terms left on the device as one-element tensors (no host wait: a
 * training step reads them at its end, train/step_record.h): InfoNCE, the entropy (unweighted) and
 * the mean similarity of the positive pairs (i != j; sim_stats' pos_sim, summed in fp32 on the
 * device). NULL + er_msg on failure. */
typedef struct {
    tensor *infonce, *entropy, *pos_sim;
} sscd_terms;
tensor *sscd_loss_terms(tensor *e, const uint8_t *match, double tau, double entropy_weight, int per_anchor_mean,
                        sscd_terms *terms);

/* Match matrix from instance ids (ids[i] == ids[j]). */
void sscd_match_from_ids(const int *ids, int N, uint8_t *match);
/* Match matrix from MixUp/CutMix sources: sample i mixes instances a[i] and b[i] with weight lam[i]
 * on a (lam 1 = unmixed); P_ij = (Y Y^T > 0) where Y_i = lam e_a + (1-lam) e_b, ContrastiveMixup. */
void sscd_match_from_mix(const int *a, const int *b, const float *lam, int N, uint8_t *match);

#endif
