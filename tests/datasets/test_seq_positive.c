/* test_seq_positive.c — training positives beyond the sequence protocol's near-duplicate gap
 * (datasets/seq_positive.h), against the ignore rule written out by hand. */
#include <stdlib.h>

#include "datasets/seq_positive.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

/* the protocol's rule as infer/eval/sequence_protocol.h states it: j is a positive of i when it is
 * another frame and neither |d| < gap_frames nor |d| < gap_frac * L */
static int is_positive(int64_t a, int64_t b, int gap, double frac, int L) {
    int64_t d = a > b ? a - b : b - a;
    return !(d < gap || (double)d < frac * L);
}

/* one sequence of 10 frames at irregular positions, stored in a shuffled row order, among rows of
 * other data: every draw is a positive by the hand-written rule, every positive is drawn, none twice as
 * often as it should be by more than chance allows */
Test(seq_positive, draws_respect_the_gap_and_reach_every_positive) {
    const int64_t pos_of[10] = {0, 1, 2, 4, 5, 9, 12, 13, 20, 21};
    int rows[10] = {17, 3, 8, 11, 0, 14, 5, 9, 2, 6};  /* row ids of frames 0..9 */
    int64_t pos[20];
    for (int i = 0; i < 20; i++) pos[i] = -1;           /* rows of other sequences / no view */
    for (int f = 0; f < 10; f++) pos[rows[f]] = pos_of[f];
    const struct { int gap; double frac; } g[] = {{0, 0.25}, {3, 0}, {2, 0.5}, {0, 0.0}, {1, 0.1}, {8, 0.3}};
    for (size_t t = 0; t < sizeof g / sizeof *g; t++)
        for (int f = 0; f < 10; f++) {
            int self = rows[f], want = 0, seen[20] = {0};
            for (int h = 0; h < 10; h++) want += h != f && is_positive(pos_of[f], pos_of[h], g[t].gap, g[t].frac, 10);
            cr_assert_eq(seq_positive_count(rows, 10, pos, self, g[t].gap, g[t].frac), want, "gap %d frac %g frame %d",
                         g[t].gap, g[t].frac, f);
            for (int d = 0; d < 400; d++) {
                rng_t r = rng_make(7, rng_stream(RNG_SAMPLING, (uint32_t)d, (uint32_t)(f + 10 * t)));
                int p = seq_positive_pick(rows, 10, pos, self, g[t].gap, g[t].frac, &r);
                if (!want) { cr_assert_eq(p, self, "no positive beyond the gap: the frame itself"); continue; }
                cr_assert_neq(p, self);
                cr_assert(pos[p] >= 0 && is_positive(pos[self], pos[p], g[t].gap, g[t].frac, 10),
                          "gap %d frac %g: frame at %lld drew the frame at %lld", g[t].gap, g[t].frac, (long long)pos[self],
                          (long long)pos[p]);
                seen[p]++;
            }
            for (int h = 0; h < 10; h++) {
                int pos_h = h != f && is_positive(pos_of[f], pos_of[h], g[t].gap, g[t].frac, 10);
                if (pos_h) cr_assert(seen[rows[h]] > 400 / want / 3, "positive %d drawn %d of 400 times (%d positives)", h,
                                     seen[rows[h]], want);
            }
        }
}

/* the boundary: a distance equal to the gap is a positive (the protocol ignores only |d| < gap) */
Test(seq_positive, the_gap_itself_is_a_positive) {
    int rows[3] = {0, 1, 2};
    int64_t pos[3] = {0, 3, 4};
    cr_assert_eq(seq_positive_count(rows, 3, pos, 0, 3, 0), 2);
    cr_assert_eq(seq_positive_count(rows, 3, pos, 0, 4, 0), 1);
    cr_assert_eq(seq_positive_count(rows, 3, pos, 0, 5, 0), 0);
    cr_assert_eq(seq_positive_count(rows, 3, pos, 0, 0, 1.0), 2);       /* 3 >= 1.0 * 3 */
    cr_assert_eq(seq_positive_count(rows, 3, pos, 1, 0, 1.0 / 3), 2);   /* from 3: 0 (d 3) and 4 (d 1 == 1 * 3 / 3: kept) */
    cr_assert_eq(seq_positive_count(rows, 3, pos, 1, 0, 0.34), 1);      /* d 1 < 1.02: ignored */
    cr_assert_eq(seq_positive_count(rows, 3, pos, 1, 0, 0), 2);         /* no gap: every other frame */
    rng_t r = rng_make(1, 0);
    cr_assert_eq(seq_positive_pick(rows, 3, pos, 0, 5, 0, &r), 0, "none left: the frame itself");
}
