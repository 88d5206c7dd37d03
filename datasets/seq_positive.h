/* seq_positive.h — the training positive of a frame of a sequence beyond the near-duplicate gap.
 *
 * The sequence protocol (infer/eval/sequence_protocol.h) ignores frame j of query i's sequence when
 *     |pos_i - pos_j| < gap_frames   or   |pos_i - pos_j| < gap_frac * L      (L: frames of the sequence)
 * and scores the rest of the sequence as positives. Training (data.positives = views with
 * data.positive_gap / data.positive_gap_frac) draws its positive from exactly that rest: uniformly
 * one frame j != i with |pos_i - pos_j| >= gap_frames and >= gap_frac * L. A frame with none left
 * (a short sequence, a wide gap) gets itself back: the caller then trains on two augmentations of
 * the one image, as for a row of a single-frame set. */
#ifndef ENDORET_DATASETS_SEQ_POSITIVE_H
#define ENDORET_DATASETS_SEQ_POSITIVE_H

#include <stdint.h>

#include "nn/base/rng.h"

/* rows[0..cnt) the rows of self's sequence (self among them), pos[row] their positions (>= 0);
 * one draw from r when a candidate exists, none otherwise. Returns the chosen row, or self. */
int seq_positive_pick(const int *rows, int cnt, const int64_t *pos, int self, int gap_frames, double gap_frac,
                      rng_t *r);
/* How many of rows[0..cnt) are candidates for self (what seq_positive_pick draws among). */
int seq_positive_count(const int *rows, int cnt, const int64_t *pos, int self, int gap_frames, double gap_frac);

#endif
