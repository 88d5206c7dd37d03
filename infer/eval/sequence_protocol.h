/* sequence_protocol.h — re-identification on video frames grouped by polyp (a file whose `scene` is
 * the sequence and `view` the frame's position in it, as `data import --layout sequences --views 0`
 * writes):
 *
 *   every frame is a query against every other frame of the file (self excluded);
 *   same-sequence frames closer than the gap are ignored (neither positive nor negative: they are
 *   near-duplicates): frame j of query i's sequence is ignored when
 *       |pos_i - pos_j| < gap_frames   or   |pos_i - pos_j| < gap_frac * L
 *   with L the number of frames of that sequence in the file; the other frames of the sequence
 *   are the positives, every frame of another sequence a negative;
 *   a query without a positive left is skipped (and counted).
 *
 * Scores are the file's distance: cosine of L2-normalised rows, or -chi2 of L1-normalised
 * histograms (infer/retrieval/distance.h). Each query's gallery is ranked by score, negatives first
 * among equal scores (pessimistic, so ties never help). Metrics:
 *   mAP         mean over the queries of AP over the full ranking (ap_ranked, metrics.h)
 *   Acc@1       share of queries whose first-ranked frame is a positive
 *   Recall@P90  the (query, frame) pairs of all queries pooled and ranked by score (negatives first
 *               on ties): the largest recall at any cut with precision >= 0.9 (0 when none)
 * Intervals: 95 % percentile bootstrap over SEQUENCES (frames of one polyp are not independent):
 * a replicate draws the query-bearing sequences with replacement, every query of a drawn copy
 * counting once per copy; the gallery is fixed. One Philox stream: the same seed, the same interval.
 *
 * EndoFinder's 2-vs-2 view protocol: seq_pick_four keeps 4 frames of each sequence by position
 * (the centres of 4 equal parts, datasets/importers.h seq_pick_views) as views 0..3 = Q1,Q2,R1,R2,
 * for infer/eval/multiview.h. */
#ifndef ENDORET_SEQUENCE_PROTOCOL_H
#define ENDORET_SEQUENCE_PROTOCOL_H

#include <stdint.h>

#include "infer/retrieval/distance.h"
#include "infer/retrieval/embeddings.h"

typedef struct {
    int gap_frames;   /* >= 0 */
    double gap_frac;  /* in [0, 1] */
} seq_gap;

/* the most (query, frame) pairs: all are ranked at once (16 bytes each, 320 MB at the limit, about
 * 4500 frames), then kept for Recall@P90 (5 bytes each) */
#define SEQ_MAX_PAIRS 20000000LL
/* the issue-31 protocol: frames closer than a quarter of their sequence are near-duplicates */
#define SEQ_DEFAULT_GAP_FRAC 0.25

typedef struct {
    int nframes, nseq;       /* frames and sequences of the file */
    int nqueries, nskipped;  /* frames with >= 1 positive / without */
    int nqseq;               /* sequences holding a query (what the bootstrap draws) */
    double map, acc1, recall_p90;
    int *seq;                /* [nframes] dense sequence id, in increasing order of the scene value */
    int64_t *pos;            /* [nframes] the view value */
    double *ap;              /* [nframes] AP, NaN when skipped */
    uint8_t *top1;           /* [nframes] 1 when rank 1 is a positive */
    /* the pooled pairs of every query, sorted for Recall@P90: query frame and positive flag */
    int64_t npairs;
    int *pair_q;
    uint8_t *pair_pos;
} seq_result;

/* E [n, D] rows, scene / view [n] (>= 0). ER_INPUT: a negative id, a (scene, view) twice, a bad
 * gap, no query with a positive, too many pairs. */
int seq_eval(const float *E, int n, int D, emb_distance dist, const int64_t *scene, const int64_t *view,
             const seq_gap *g, seq_result *out);
/* The same with nE sets of descriptors of the same frames (E[f] [n, D]): query i and its whole gallery
 * are scored in set which[i] (which NULL: set 0), e.g. the encoder of the leave-sequences-out fold
 * that held out query i's sequence (infer/eval/seq_folds.h). */
int seq_eval_folded(const float *const *E, int nE, const int *which, int n, int D, emb_distance dist, const int64_t *scene,
                    const int64_t *view, const seq_gap *g, seq_result *out);
/* The same on an embedding file (scene and view required, the file's distance). */
int seq_eval_emb(const emb_set *e, const seq_gap *g, seq_result *out);
/* Only frames with keep[i] stay queries (the others stay in every gallery): mAP, Acc@1, Recall@P90
 * and the counts recomputed on them, e.g. the queries of one leave-sequences-out fold. ER_INPUT when
 * none of them has a positive. */
int seq_keep_queries(seq_result *r, const uint8_t *keep);
void seq_result_free(seq_result *r);

typedef struct {
    double map_lo, map_hi, acc1_lo, acc1_hi, rp90_lo, rp90_hi;
    int replicates;
} seq_interval;
/* B >= 1 replicates (B = 0: NaN bounds). */
void seq_bootstrap(const seq_result *r, int B, uint64_t seed, seq_interval *out);

typedef struct {
    int nqueries, nqseq, replicates;
    double map_a, map_b, map_d_lo, map_d_hi, map_p;
    double acc1_a, acc1_b, acc1_d_lo, acc1_d_hi, acc1_p;
} seq_paired;
/* Paired bootstrap over sequences: each replicate's one draw scores A and B; intervals of A - B and
 * two-sided p-values (paired.h). A and B must be the same frames (same sequences, positions and
 * gap): ER_INPUT else. */
int seq_paired_test(const seq_result *a, const seq_result *b, int B, uint64_t seed, seq_paired *out);

/* Rows of e kept for the 2-vs-2 protocol, as a new file: 4 frames per sequence (by position),
 * view 0..3; sequences of fewer than 4 frames are left out (*nshort). ER_INPUT when none has 4. */
int seq_pick_four(const emb_set *e, emb_set *out, int *nshort);

#endif
