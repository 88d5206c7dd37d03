/* seq_positive.c — see seq_positive.h. */
#include "datasets/seq_positive.h"

#include <stdlib.h>

/* the complement of the protocol's ignore rule, self excluded */
static int beyond_gap(int64_t a, int64_t b, int gap_frames, double cut) {
    int64_t d = llabs(a - b);
    return d >= gap_frames && (double)d >= cut;
}

int seq_positive_count(const int *rows, int cnt, const int64_t *pos, int self, int gap_frames, double gap_frac) {
    double cut = gap_frac * cnt;
    int m = 0;
    for (int k = 0; k < cnt; k++) m += rows[k] != self && beyond_gap(pos[self], pos[rows[k]], gap_frames, cut);
    return m;
}

int seq_positive_pick(const int *rows, int cnt, const int64_t *pos, int self, int gap_frames, double gap_frac,
                      rng_t *r) {
    int m = seq_positive_count(rows, cnt, pos, self, gap_frames, gap_frac);
    if (!m) return self;
    int want = (int)rng_below(r, (uint32_t)m);
    double cut = gap_frac * cnt;
    for (int k = 0; k < cnt; k++)
        if (rows[k] != self && beyond_gap(pos[self], pos[rows[k]], gap_frames, cut) && want-- == 0) return rows[k];
    return self; /* not reached: m candidates exist */
}
