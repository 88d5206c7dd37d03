/* seq_select.h — the hybrid descriptor's histogram weight (infer/retrieval/hybrid.h) chosen on the
 * training folds only, never on the held-out one (issue 31, item 3: nested leave-sequences-out).
 *
 * Inputs as seq_folds.h: K files of the same frames, file j embedding every frame with the encoder
 * that held out fold j, the colour histograms of those frames, and fold[i] of each frame. For each
 * held-out fold k and each weight w of a grid, the inner score is the sequence protocol's mAP
 * (sequence_protocol.h, the given gap) over the frames of the OTHER folds:
 *     query i of fold j != k, ranked against the frames of every fold != k,
 *     all its scores from emb_hybrid(file j, histograms, w)   (the encoder that never saw i's sequence)
 * so no row of fold k (its descriptors, histograms, sequences or positions) enters fold k's choice.
 * Removing fold k removes whole sequences, so the gap fraction of the others is unchanged. The weight
 * chosen for fold k is the first of the grid with the highest inner mAP (grid order breaks ties). */
#ifndef ENDORET_SEQ_SELECT_H
#define ENDORET_SEQ_SELECT_H

#include "infer/eval/sequence_protocol.h"
#include "infer/retrieval/embeddings.h"

typedef struct {
    int nfolds, ngrid;
    double *grid;   /* [ngrid] the weights tried, in the caller's order */
    double *map;    /* [nfolds * ngrid] inner mAP of weight g for held-out fold k at k * ngrid + g */
    int *chosen;    /* [nfolds] grid index of fold k's weight */
} seq_weight_choice;

/* es: nf >= 2 cosine files, one per fold (fold[i] in 0..nf-1 for every frame, each fold present);
 * hist: chi2 histograms of the same rows; grid: ngrid >= 1 weights in [0, 1]. ER_INPUT naming the
 * mismatch (other rows, a fold without its file, a weight outside [0, 1], no query left). */
int seq_select_hybrid_weight(const emb_set *es, int nf, const emb_set *hist, const int *fold, const seq_gap *g,
                             const double *grid, int ngrid, seq_weight_choice *out);
void seq_weight_choice_free(seq_weight_choice *c);

#endif
