/* triplet.h — triplet margin loss on cosine similarity with an in-batch miner, as the
 * dual-backbone reference uses pytorch-metric-learning (spec section 2.7):
 *
 *   s_ij = <e_i, e_j> / (|e_i| |e_j|)                   (CosineSimilarity: larger = closer)
 *   triplets (a, p, n): y_a = y_p, a != p, y_n != y_a   (every in-batch triplet)
 *   miner (TripletMarginMiner): m = s_ap - s_an;  semihard keeps 0 < m <= miner_margin,
 *         hard keeps m <= 0, all keeps m <= miner_margin
 *   loss (TripletMarginLoss): l = max(0, s_an - s_ap + margin), reduced by AvgNonZero (the mean
 *         over triplets with l > 0; 0 when none)
 *   a batch where the miner keeps nothing is scored on all in-batch triplets (spec section 2.7).
 *
 * The reference passes its CLI margin (0.3) to the miner only and hard-codes the loss margin
 * 0.6; both are explicit here. Mining runs on the host on the similarity values (no gradient);
 * the loss is built from ops (matmul of the normalised rows, index_select of the chosen entries),
 * so its gradient reaches the embeddings. */
#ifndef ENDORET_TRIPLET_H
#define ENDORET_TRIPLET_H

#include <stdint.h>

#include "nn/tensor.h"

typedef enum { MINER_SEMIHARD = 0, MINER_HARD, MINER_ALL } miner_kind;

/* "semihard" | "hard" | "all"; ER_INPUT naming `key` otherwise. */
int miner_parse(const char *s, const char *key, miner_kind *k);
const char *miner_name(miner_kind k);

/* Triplets of the row-major similarity matrix S [n, n] and labels [n] that `kind` keeps, written as
 * (a, p, n) int32 triples into out (room for n^3 triples; NULL: count only), in (a, p, n) order.
 * kind < 0: every valid triplet. Returns how many. */
int64_t triplet_mine(const float *S, const int *labels, int n, int kind, double miner_margin, int32_t *out);

typedef struct {
    int64_t valid;     /* in-batch triplets */
    int64_t mined;     /* kept by the miner (0: the loss used all valid ones) */
    int64_t active;    /* triplets with loss > 0 (the AvgNonZero denominator) */
    double loss;
} triplet_stats;

/* e [n, D] (any scale), labels [n] >= 0 -> scalar loss. A batch without any valid triplet (one
 * class, or singletons only) gives 0 with no gradient path to e other than 0 * sum. */
tensor *triplet_loss(tensor *e, const int *labels, miner_kind kind, double miner_margin, double margin,
                     triplet_stats *st);

#endif
