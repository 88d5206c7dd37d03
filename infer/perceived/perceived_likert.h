/* perceived_likert.h — perceived-similarity ground truth (André et al., MICCAI 2011, spec §3.3).
 *
 * File format (CSV, one judgement per line, optional header "a,b,score,observer"):
 *     a,b,score,observer
 *     12,40,+1,alice
 *     40,12,-2,bob          <- the same unordered pair, scored by another observer
 * a, b: item ids (the "ids" of an embedding file); score: the 4-point Likert scale
 * -2 very dissimilar, -1 rather dissimilar, +1 rather similar, +2 very similar; observer: a
 * free name without commas. Pairs are unordered; a pair may be scored several times or never.
 * Pair score = mean over its judgements; S = {score > 0}, D = {score < 0} (a mean of exactly 0
 * belongs to neither). Blank lines and lines starting with '#' are skipped. */
#ifndef ENDORET_PERCEIVED_LIKERT_H
#define ENDORET_PERCEIVED_LIKERT_H

#include <stdint.h>

typedef struct {
    int64_t a, b;   /* as written */
    int score;      /* -2, -1, 1, 2 */
    char *observer; /* owned */
    int pair;       /* index into likert_gt.pairs */
    int line;       /* line of the file it came from, for messages */
} likert_record;

typedef struct {
    int64_t a, b;   /* a < b */
    double score;   /* mean over judgements */
    int nscores;
} likert_pair;

typedef struct {
    int nrec;
    likert_record *rec;
    int npairs;
    likert_pair *pairs; /* sorted by (a, b) */
    char *name;         /* the file (or name) it was parsed from, for messages; owned */
} likert_gt;

/* Likert level index 0..3 of a score -2,-1,+1,+2; -1 for anything else. */
int likert_level(int score);
extern const int LIKERT_SCORES[4];

/* Parse a CSV text; `name` is used in messages ("pairs.csv: line 7: ..."). ER_OK / ER_INPUT. */
int likert_parse(const char *text, const char *name, likert_gt *gt);
int likert_load(const char *path, likert_gt *gt);
void likert_free(likert_gt *gt);

/* Map each pair's ids to row indices of an id table (ids[n]); a pair whose id is absent is an
 * ER_INPUT error naming the id, `ids_name`, and the scores file and line of the pair. ia/ib: npairs ints, allocated. */
int likert_index_pairs(const likert_gt *gt, const int64_t *ids, int n, const char *ids_name,
                       int **ia, int **ib);

#endif
