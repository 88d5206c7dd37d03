/* test_sequence_protocol.c — the sequence protocol (infer/eval/sequence_protocol.h) on hand-made
 * sequences whose answers are worked out by hand in the comments: 2-d unit vectors at chosen
 * angles, so cosine order = order of angle differences.
 *
 *   sequence A (scene 7): a0 at 0 deg (position 0), a1 at 10 (1), a2 at 50 (2)
 *   sequence B (scene 3): b0 at 22 deg (position 0), b1 at 61 (1)
 * Rows are stored B first and out of position order, so nothing relies on the file's order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/sequence_protocol.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_capture.h"
#include "tests/test_util.h"

int cmd_eval(int argc, char **argv);

enum { A0, A1, A2, B0, B1 };
static const int ROW_OF[5] = {2, 4, 0, 3, 1}; /* frame -> row of the file */

static void make(emb_set *e, const double *deg) {
    static const int64_t scene[5] = {7, 7, 7, 3, 3}, pos[5] = {0, 1, 2, 0, 1};
    emb_alloc(e, 5, 2);
    e->scene = malloc(sizeof *e->scene * 5);
    e->view = malloc(sizeof *e->view * 5);
    for (int f = 0; f < 5; f++) {
        int r = ROW_OF[f];
        e->x[2 * r] = (float)cos(deg[f] * M_PI / 180), e->x[2 * r + 1] = (float)sin(deg[f] * M_PI / 180);
        e->scene[r] = scene[f], e->view[r] = pos[f];
    }
}
static const double DEG[5] = {0, 10, 50, 22, 61};

#define EQ(a, b) cr_expect(fabs((a) - (b)) < 1e-9, "%s = %.12g, expected %.12g", #a, (double)(a), (double)(b))

/* gap 0: every other frame is ranked.
 *   a0: a1 10+  b0 22-  a2 50+  b1 61-   AP (1/1 + 2/3)/2 = 5/6   rank 1 +
 *   a1: a0 10+  b0 12-  a2 40+  b1 51-   AP 5/6                   rank 1 +
 *   a2: b1 11-  b0 28-  a1 40+  a0 50+   AP (1/3 + 2/4)/2 = 5/12
 *   b0: a1 12-  a0 22-  a2 28-  b1 39+   AP 1/4
 *   b1: a2 11-  b0 39+  a1 51-  a0 61-   AP 1/2
 * mAP = (10 + 10 + 5 + 3 + 6)/12 / 5 = 34/60, Acc@1 = 2/5.
 * Pooled pairs by angle: 10 (2 positives), 11 (2 neg), 12 (2 neg), 22, 28, 39 (2 pos), 40 (2 pos)...
 * of 8 positives: precision 1 up to recall 2/8, then never >= 0.9 again: Recall@P90 = 0.25. */
Test(eval_sequence, hand_made_gap_zero) {
    emb_set e;
    make(&e, DEG);
    seq_result r;
    seq_gap g = {0, 0};
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    cr_expect_eq(r.nframes, 5);
    cr_expect_eq(r.nseq, 2);
    cr_expect_eq(r.nqueries, 5);
    cr_expect_eq(r.nskipped, 0);
    EQ(r.map, 34.0 / 60);
    EQ(r.acc1, 2.0 / 5);
    EQ(r.recall_p90, 0.25);
    EQ(r.ap[ROW_OF[A2]], 5.0 / 12);
    EQ(r.ap[ROW_OF[B0]], 1.0 / 4);
    seq_result_free(&r);
    /* gap 1 frame ignores only the frame itself: the same numbers */
    g.gap_frames = 1;
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    EQ(r.map, 34.0 / 60);
    seq_result_free(&r);
    emb_free(&e);
}

/* gap 2 frames: a0-a1, a1-a2, b0-b1 (1 apart) are ignored.
 *   a0: b0 22-  a2 50+  b1 61-           AP 1/2
 *   a1: no positive left                 skipped
 *   a2: b1 11-  b0 28-  a0 50+           AP 1/3
 *   b0, b1: no positive left             skipped
 * mAP = 5/12 over 2 queries, 3 skipped, Acc@1 0.
 * gap fraction 0.5: A (3 frames) ignores d < 1.5 (as above), B (2 frames) ignores d < 1: nothing,
 * so b0 (1/4) and b1 (1/2) are queries again: mAP = (1/2 + 1/3 + 1/4 + 1/2)/4 = 19/48. */
Test(eval_sequence, gap_absolute_and_fraction) {
    emb_set e;
    make(&e, DEG);
    seq_result r;
    seq_gap g = {2, 0};
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    cr_expect_eq(r.nqueries, 2);
    cr_expect_eq(r.nskipped, 3);
    cr_expect_eq(r.nqseq, 1);
    EQ(r.map, 5.0 / 12);
    EQ(r.acc1, 0);
    cr_expect(isnan(r.ap[ROW_OF[A1]]));
    seq_result_free(&r);
    g = (seq_gap){0, 0.5};
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    cr_expect_eq(r.nqueries, 4);
    cr_expect_eq(r.nskipped, 1);
    EQ(r.map, 19.0 / 48);
    seq_result_free(&r);
    /* both given: a frame is ignored when either says so (B skipped again by the 2 frames) */
    g = (seq_gap){2, 0.5};
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    EQ(r.map, 5.0 / 12);
    seq_result_free(&r);
    /* a gap >= every sequence's length leaves no query: one clear error */
    g = (seq_gap){3, 0};
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    cr_expect(strstr(er_msg(), "no frame has a positive"), "%s", er_msg());
    g = (seq_gap){0, 1.0};
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    g = (seq_gap){-1, 0};
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    g = (seq_gap){0, 1.5};
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    emb_free(&e);
}

Test(eval_sequence, bad_files) {
    emb_set e;
    make(&e, DEG);
    seq_result r;
    seq_gap g = {0, 0};
    e.view[ROW_OF[A1]] = 0; /* two frames of A at position 0 */
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    cr_expect(strstr(er_msg(), "scene 7 view 0"), "%s", er_msg());
    e.view[ROW_OF[A1]] = -1;
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    cr_expect(strstr(er_msg(), "no view"), "%s", er_msg());
    free(e.view);
    e.view = NULL;
    cr_expect_eq(seq_eval_emb(&e, &g, &r), ER_INPUT);
    cr_expect(strstr(er_msg(), "no view ids"), "%s", er_msg());
    emb_free(&e);
    /* more pairs than are ranked at once: refused before allocating them */
    int n = 5000;
    float *x = calloc((size_t)n, sizeof *x);
    int64_t *sc = calloc((size_t)n, sizeof *sc), *vw = malloc(sizeof *vw * (size_t)n);
    for (int i = 0; i < n; i++) vw[i] = i;
    cr_expect_eq(seq_eval(x, n, 1, DIST_COSINE, sc, vw, &g, &r), ER_INPUT);
    cr_expect(strstr(er_msg(), "24995000 pairs"), "%s", er_msg());
    free(x), free(sc), free(vw);
}

/* Whole sequences are drawn: with gap 0, A's queries average 25/36 (5/6, 5/6, 5/12) and B's 3/8
 * (1/4, 1/2); a replicate draws 2 sequences, so its mAP is 25/36 (A,A), 3/8 (B,B) or 34/60 (A,B),
 * each at least 1/4 of the time: the 2.5th / 97.5th percentiles are exactly 3/8 and 25/36 (a
 * bootstrap over single queries would reach 1/4 or 5/6). Acc@1: B's 0 and A's 2/3. */
Test(eval_sequence, bootstrap_draws_whole_sequences) {
    emb_set e;
    make(&e, DEG);
    seq_result r;
    seq_gap g = {0, 0};
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    seq_interval ci, again, other;
    seq_bootstrap(&r, 1000, 19, &ci);
    cr_expect_eq(ci.replicates, 1000);
    EQ(ci.map_lo, 3.0 / 8);
    EQ(ci.map_hi, 25.0 / 36);
    EQ(ci.acc1_lo, 0);
    EQ(ci.acc1_hi, 2.0 / 3);
    /* the same seed, the same interval */
    seq_bootstrap(&r, 1000, 19, &again);
    cr_expect(ci.map_lo == again.map_lo && ci.map_hi == again.map_hi && ci.acc1_lo == again.acc1_lo &&
              ci.acc1_hi == again.acc1_hi && ci.rp90_lo == again.rp90_lo && ci.rp90_hi == again.rp90_hi);
    /* B = 0: no interval */
    seq_bootstrap(&r, 0, 19, &other);
    cr_expect(isnan(other.map_lo) && other.replicates == 0);
    seq_result_free(&r);
    /* one sequence holding queries (gap 2: only A): every replicate is A, the interval collapses */
    g.gap_frames = 2;
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    seq_bootstrap(&r, 200, 5, &ci);
    EQ(ci.map_lo, 5.0 / 12);
    EQ(ci.map_hi, 5.0 / 12);
    EQ(ci.rp90_lo, r.recall_p90);
    EQ(ci.rp90_hi, r.recall_p90);
    seq_result_free(&r);
    emb_free(&e);
}

/* Paired over sequences: B puts A's frames at 0, 1, 2 deg and B's at 90, 91: every AP is 1. The
 * replicate differences are 25/36 - 1, 3/8 - 1 or 34/60 - 1, so the interval is [-5/8, -11/36] and
 * no replicate reaches 0 (p = 0). A against itself: every difference 0, p = 1. */
Test(eval_sequence, paired_over_sequences) {
    static const double PERFECT[5] = {0, 1, 2, 90, 91};
    emb_set ea, eb;
    make(&ea, DEG);
    make(&eb, PERFECT);
    seq_result a, b;
    seq_gap g = {0, 0};
    cr_assert_eq(seq_eval_emb(&ea, &g, &a), ER_OK, "%s", er_msg());
    cr_assert_eq(seq_eval_emb(&eb, &g, &b), ER_OK, "%s", er_msg());
    EQ(b.map, 1);
    seq_paired t;
    cr_assert_eq(seq_paired_test(&a, &b, 1000, 19, &t), ER_OK, "%s", er_msg());
    EQ(t.map_a, 34.0 / 60);
    EQ(t.map_b, 1);
    EQ(t.map_d_lo, 3.0 / 8 - 1);
    EQ(t.map_d_hi, 25.0 / 36 - 1);
    EQ(t.map_p, 0);
    EQ(t.acc1_d_lo, -1);
    cr_assert_eq(seq_paired_test(&a, &a, 500, 19, &t), ER_OK, "%s", er_msg());
    EQ(t.map_d_lo, 0);
    EQ(t.map_d_hi, 0);
    EQ(t.map_p, 1);
    seq_result_free(&b);
    /* other frames (a gap that changes the queries, another position) are refused */
    g.gap_frames = 2;
    cr_assert_eq(seq_eval_emb(&eb, &g, &b), ER_OK, "%s", er_msg());
    cr_expect_eq(seq_paired_test(&a, &b, 100, 19, &t), ER_INPUT);
    seq_result_free(&b);
    g.gap_frames = 0;
    eb.view[ROW_OF[B1]] = 5;
    cr_assert_eq(seq_eval_emb(&eb, &g, &b), ER_OK, "%s", er_msg());
    cr_expect_eq(seq_paired_test(&a, &b, 100, 19, &t), ER_INPUT);
    cr_expect(strstr(er_msg(), "not the same frames"), "%s", er_msg());
    seq_result_free(&b);
    seq_result_free(&a);
    emb_free(&ea);
    emb_free(&eb);
}

/* chi2 files rank by -chi2 of L1-normalised histograms: three 2-bin histograms per sequence.
 * Sequence 0: (1,0) (0.9,0.1) (0.5,0.5); sequence 1: (0,1) (0.1,0.9) — the halves are nearer to
 * their own sequence except (0.5,0.5), equidistant-ish: chi2((.5,.5),(.9,.1)) = .16/1.4 + .16/.6 =
 * 0.381, to (0.1,0.9) the same 0.381 — a tie, ranked pessimistically (the negative first). */
Test(eval_sequence, chi2_and_ties_pessimistic) {
    emb_set e;
    emb_alloc(&e, 5, 2);
    const float h[5][2] = {{1, 0}, {0.9f, 0.1f}, {0.5f, 0.5f}, {0, 1}, {0.1f, 0.9f}};
    const int64_t sc[5] = {0, 0, 0, 1, 1}, ps[5] = {0, 1, 2, 0, 1};
    e.scene = malloc(sizeof *e.scene * 5);
    e.view = malloc(sizeof *e.view * 5);
    for (int i = 0; i < 5; i++) e.x[2 * i] = h[i][0], e.x[2 * i + 1] = h[i][1], e.scene[i] = sc[i], e.view[i] = ps[i];
    e.distance = xstrdup("chi2");
    seq_result r;
    seq_gap g = {0, 0};
    cr_assert_eq(seq_eval_emb(&e, &g, &r), ER_OK, "%s", er_msg());
    /* query (0.5,0.5): (0.9,0.1)+ and (0.1,0.9)- tie at 0.381, then (1,0)+ at 0.667 and (0,1)- at
     * 0.667 tie again: order - + - +, AP (1/2 + 2/4)/2 = 1/2, rank 1 a negative */
    EQ(r.ap[2], 0.5);
    cr_expect_eq(r.top1[2], 0);
    seq_result_free(&r);
    emb_free(&e);
}

/* 2-vs-2: 4 frames per sequence at the centres of 4 equal parts; 10 frames -> positions 1 3 6 8 */
Test(eval_sequence, pick_four_by_position) {
    emb_set e, f;
    emb_alloc(&e, 13, 1);
    e.scene = malloc(sizeof *e.scene * 13);
    e.view = malloc(sizeof *e.view * 13);
    for (int i = 0; i < 10; i++) e.scene[i] = 4, e.view[i] = 9 - i, e.x[i] = (float)(9 - i), e.ids[i] = 100 + (9 - i);
    for (int i = 10; i < 13; i++) e.scene[i] = 2, e.view[i] = i - 10, e.x[i] = 1;
    int nshort;
    cr_assert_eq(seq_pick_four(&e, &f, &nshort), ER_OK, "%s", er_msg());
    cr_expect_eq(nshort, 1, "the 3-frame sequence is left out");
    cr_assert_eq(f.n, 4);
    const int want[4] = {1, 3, 6, 8};
    for (int k = 0; k < 4; k++) {
        cr_expect_eq(f.view[k], k);
        cr_expect_eq(f.scene[k], 4);
        cr_expect_eq(f.ids[k], 100 + want[k]);
        cr_expect_eq(f.x[k], (float)want[k]);
    }
    emb_free(&f);
    for (int i = 0; i < 10; i++) e.scene[i] = 5 + i; /* every sequence too short */
    cr_expect_eq(seq_pick_four(&e, &f, &nshort), ER_INPUT);
    emb_free(&e);
}

/* `eval sequence` and `eval compare --sequence` print the library's numbers; bad options are one
 * ER_INPUT. The hand-made file has no sequence of 4 frames, so the 2-vs-2 part is refused unless
 * --no-2v2 (compare needs it: a file of 4-frame sequences is used there). */
Test(eval_sequence, commands) {
    const char *root = test_tmpdir();
    char *a = path_join(root, "a.safetensors"), *b = path_join(root, "b.safetensors");
    emb_set e;
    make(&e, DEG);
    cr_assert_eq(emb_save(a, &e), ER_OK, "%s", er_msg());
    emb_free(&e);
    char *out = NULL;
    char *ok[] = {"eval", "sequence", "--emb", a, "--gap-frac", "0", "--bootstrap", "1000", "--no-2v2", "--json", NULL};
    cr_assert_eq(test_capture_stdout(cmd_eval, 10, ok, &out), ER_OK, "%s", er_msg());
    cr_expect(strstr(out, "\"mAP\": 0.566667,"), "%s", out);
    cr_expect(strstr(out, "\"mAP_lo\": 0.375"), "%s", out);
    cr_expect(strstr(out, "\"skipped\": 0"), "%s", out);
    free(out);
    char *no4[] = {"eval", "sequence", "--emb", a, NULL};
    cr_expect_eq(cmd_eval(4, no4), ER_INPUT);
    cr_expect(strstr(er_msg(), "a.safetensors: 2-vs-2 protocol: no sequence has 4 frames (2 too short)"), "%s", er_msg());
    char *badgap[] = {"eval", "sequence", "--emb", a, "--gap-frac", "1.5", NULL};
    cr_expect_eq(cmd_eval(6, badgap), ER_INPUT);
    cr_expect(strstr(er_msg(), "--gap-frac: expected a number in [0, 1], got '1.5'"), "%s", er_msg());
    char *badneg[] = {"eval", "sequence", "--emb", a, "--gap", "-2", NULL};
    cr_expect_eq(cmd_eval(6, badneg), ER_INPUT);
    /* compare: two sequences of 5 frames (so 2-vs-2 has 4 per sequence), the same rows in both
     * files; A interleaves the sequences' angles (0,14,28.. vs 7,21,..), B keeps them apart: B's
     * every AP is 1 and A's mAP is lower in every replicate */
    char *c = path_join(root, "c.safetensors");
    for (int f = 0; f < 2; f++) {
        emb_alloc(&e, 10, 2);
        e.scene = malloc(sizeof *e.scene * 10);
        e.view = malloc(sizeof *e.view * 10);
        for (int i = 0; i < 10; i++) {
            double deg = f ? (i < 5 ? i : 85 + i) : (i < 5 ? 14.0 * i : 14.0 * (i - 5) + 7);
            e.x[2 * i] = (float)cos(deg * M_PI / 180), e.x[2 * i + 1] = (float)sin(deg * M_PI / 180);
            e.scene[i] = i / 5, e.view[i] = i % 5;
        }
        cr_assert_eq(emb_save(f ? c : b, &e), ER_OK, "%s", er_msg());
        emb_free(&e);
    }
    char *cmp[] = {"eval", "compare", b, c, "--sequence", "--gap", "0", "--gap-frac", "0", "--json", NULL};
    cr_assert_eq(test_capture_stdout(cmd_eval, 10, cmp, &out), ER_OK, "%s", er_msg());
    cr_expect(strstr(out, "\"mAP_b\": 1,"), "%s", out);
    cr_expect(strstr(out, "\"mAP_p\": 0,"), "%s", out);
    cr_expect(strstr(out, "\"uAP_2v2_b\": 1,"), "%s", out);
    free(out);
    char *other[] = {"eval", "compare", a, c, "--sequence", NULL};
    cr_expect_eq(cmd_eval(5, other), ER_INPUT, "other frames");
    char *mixed[] = {"eval", "compare", a, b, "--sequence", "--ref-view", "2", NULL};
    cr_expect_eq(cmd_eval(7, mixed), ER_INPUT);
    cr_expect(strstr(er_msg(), "--sequence takes no --ref-view"), "%s", er_msg());
    free(a), free(b), free(c);
}

/* The seed fixes the draws: 12 random sequences of 3..8 frames (8-d Gaussian rows, each sequence
 * around its own centre), where many replicate values exist: the same seed gives the same
 * bounds, another seed other bounds. */
Test(eval_sequence, bootstrap_seed_reproduces) {
    rng_t g = rng_make(3, 0);
    emb_set e;
    int n = 0, len[12];
    for (int s = 0; s < 12; s++) n += len[s] = 3 + (int)rng_below(&g, 6);
    emb_alloc(&e, n, 8);
    e.scene = malloc(sizeof *e.scene * (size_t)n);
    e.view = malloc(sizeof *e.view * (size_t)n);
    for (int s = 0, i = 0; s < 12; s++) {
        float c[8];
        for (int d = 0; d < 8; d++) c[d] = rng_normal(&g);
        for (int f = 0; f < len[s]; f++, i++) {
            for (int d = 0; d < 8; d++) e.x[i * 8 + d] = c[d] + 1.5f * rng_normal(&g);
            e.scene[i] = s, e.view[i] = f;
        }
    }
    seq_result r;
    seq_gap gp = {0, 0.25};
    cr_assert_eq(seq_eval_emb(&e, &gp, &r), ER_OK, "%s", er_msg());
    seq_interval a, b, c;
    seq_bootstrap(&r, 300, 19, &a);
    seq_bootstrap(&r, 300, 19, &b);
    seq_bootstrap(&r, 300, 20, &c);
    cr_expect(a.map_lo == b.map_lo && a.map_hi == b.map_hi && a.acc1_lo == b.acc1_lo && a.rp90_hi == b.rp90_hi);
    cr_expect(a.map_lo != c.map_lo || a.map_hi != c.map_hi, "seed 20 drew the same bounds as seed 19: %g %g", c.map_lo, c.map_hi);
    cr_expect(a.map_lo < r.map && r.map < a.map_hi, "%g in [%g, %g]", r.map, a.map_lo, a.map_hi);
    seq_result_free(&r);
    emb_free(&e);
}
