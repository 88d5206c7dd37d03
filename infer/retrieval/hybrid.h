/* hybrid.h — a learned descriptor fused with a colour histogram into one cosine descriptor: a
 * named option (`embed --hybrid A --hist H --hist-weight W`) with its own rows, never a silent change
 * of a learned file. Each row is
 *     [ sqrt(1 - w) * a / |a|_2 ,  sqrt(w) * sqrt(h / |h|_1) ]
 * where sqrt(h / |h|_1) has unit L2 norm, so the row has unit norm and the cosine of two rows is
 *     (1 - w) * cos(a, a')  +  w * BC(h, h'),      BC(h, h') = sum_k sqrt(p_k p'_k), p = h / |h|_1
 * the learned cosine and the histograms' Bhattacharyya coefficient (a histogram similarity in [0, 1];
 * w = 1 is the histogram alone under BC, w = 0 the learned descriptor alone). */
#ifndef ENDORET_RETRIEVAL_HYBRID_H
#define ENDORET_RETRIEVAL_HYBRID_H

#include "infer/retrieval/embeddings.h"

/* a: any cosine file; h: non-negative histograms of distance chi2 (a row summing to 0 is refused); both of the same
 * rows (n, ids, scene, view equal). out takes a's ids, labels, scene, view and names; distance cosine.
 * ER_INPUT naming the mismatch or the bad row. */
int emb_hybrid(const emb_set *a, const emb_set *h, double w, emb_set *out);

#endif
