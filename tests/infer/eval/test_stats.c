/* test_stats.c — bootstrap intervals and paired tests (infer/eval/bootstrap.h, paired.h) against
 * values from tests/infer/eval/make_stats_refs.py (scipy.stats.binomtest, numpy.percentile, the
 * exact binomial bootstrap distribution of Acc@1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/bootstrap.h"
#include "infer/eval/paired.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "tests/infer/eval/stats_refs.h"
#include "tests/test_util.h"

int cmd_eval(int argc, char **argv);

Test(infer_stats, mcnemar_percentile_and_paired_p_match_the_references) {
    for (size_t i = 0; i < sizeof REF_MCNEMAR / sizeof *REF_MCNEMAR; i++) {
        double p = mcnemar_exact_p(REF_MCNEMAR[i].b, REF_MCNEMAR[i].c);
        cr_expect_float_eq(p, REF_MCNEMAR[i].p, 1e-12 * fmax(1, REF_MCNEMAR[i].p), "McNemar b %d c %d: %.17g vs %.17g",
                           REF_MCNEMAR[i].b, REF_MCNEMAR[i].c, p, REF_MCNEMAR[i].p);
    }
    int n = sizeof REF_VALUES / sizeof *REF_VALUES;
    double v[64];
    for (int q = 0; q < 3; q++) {
        memcpy(v, REF_VALUES, sizeof REF_VALUES);
        cr_expect_float_eq(percentile_linear(v, n, REF_QS[q]), REF_PERCENTILES[q], 1e-12, "percentile %g", REF_QS[q]);
    }
    cr_expect_float_eq(paired_bootstrap_p(REF_VALUES, n), REF_PAIRED_P, 1e-12);
}

/* n queries with one prediction each (k = 1); the first `hits` are right */
static void one_guess_per_query(int n, int hits, int shift, reid_pred *p, reid_gt *gt) {
    for (int q = 0; q < n; q++) {
        int right = (q + shift) % n < hits;
        gt[q] = (reid_gt){q, 1000 + q};
        p[q] = (reid_pred){q, right ? 1000 + q : 5000 + q, -0.01 * (q % 17)};
    }
}

Test(infer_stats, acc1_interval_is_the_binomial_bootstrap_distribution) {
    reid_pred p[REF_ACC_N];
    reid_gt gt[REF_ACC_N];
    one_guess_per_query(REF_ACC_N, REF_ACC_HITS, 0, p, gt);
    reid_interval a, b;
    cr_assert_eq(reid_bootstrap(p, REF_ACC_N, gt, REF_ACC_N, 4000, 7, &a), ER_OK);
    cr_assert_eq(a.replicates, 4000);
    /* Monte-Carlo percentiles of a lattice distribution (steps of 1/200): within a step and a bit */
    cr_expect(fabs(a.lo.acc1 - REF_ACC_LO) <= 0.0051, "Acc@1 low %g vs binomial %g", a.lo.acc1, REF_ACC_LO);
    cr_expect(fabs(a.hi.acc1 - REF_ACC_HI) <= 0.0051, "Acc@1 high %g vs binomial %g", a.hi.acc1, REF_ACC_HI);
    cr_expect(a.lo.uap <= a.hi.uap);
    cr_assert_eq(reid_bootstrap(p, REF_ACC_N, gt, REF_ACC_N, 4000, 7, &b), ER_OK);
    cr_expect(!memcmp(&a, &b, sizeof a), "same seed, same interval");
    /* the point estimate's hit count agrees with reid_metrics's Acc@1 */
    uint8_t hit[REF_ACC_N];
    reid_top1_hits(p, REF_ACC_N, gt, REF_ACC_N, hit);
    int h = 0;
    for (int i = 0; i < REF_ACC_N; i++) h += hit[i];
    cr_expect_eq(h, REF_ACC_HITS);
}

Test(infer_stats, paired_test_counts_discordant_queries) {
    enum { N = 120 };
    reid_pred pa[N], pb[N];
    reid_gt ga[N], gb[N];
    one_guess_per_query(N, 90, 0, pa, ga);  /* A right on queries 0..89 */
    one_guess_per_query(N, 70, 30, pb, gb); /* B right on queries 90..119 and 0..39 */
    reid_paired t;
    cr_assert_eq(reid_paired_test(pa, N, pb, N, ga, N, gb, N, 500, 3, &t), ER_OK, "%s", er_msg());
    cr_expect_eq(t.a_only, 50);
    cr_expect_eq(t.b_only, 30);
    cr_expect_eq(t.both, 40);
    cr_expect_float_eq(t.p_mcnemar, mcnemar_exact_p(50, 30), 1e-15);
    cr_expect_float_eq(t.acc1_a, 0.75, 1e-12);
    cr_expect(t.delta_lo < t.uap_a - t.uap_b && t.uap_a - t.uap_b < t.delta_hi, "[%g, %g] around %g", t.delta_lo, t.delta_hi, t.uap_a - t.uap_b);
    /* an encoder against itself: no difference, p = 1 */
    cr_assert_eq(reid_paired_test(pa, N, pa, N, ga, N, ga, N, 200, 3, &t), ER_OK);
    cr_expect_float_eq(t.p_uap, 1.0, 1e-12);
    cr_expect_float_eq(t.p_mcnemar, 1.0, 1e-12);
    /* other queries: refused */
    gb[5].r = 77;
    cr_expect_eq(reid_paired_test(pa, N, pb, N, ga, N, gb, N, 100, 3, &t), ER_INPUT);
}

Test(infer_stats, eval_compare_command) {
    const char *dir = test_tmpdir();
    char *a = path_join(dir, "a.safetensors"), *b = path_join(dir, "b.safetensors");
    for (int f = 0; f < 2; f++) {
        emb_set e;
        emb_alloc(&e, 40, 3);
        e.scene = malloc(40 * 8);
        e.view = malloc(40 * 8);
        for (int i = 0; i < 40; i++) {
            e.scene[i] = i % 20;
            e.view[i] = i / 20;
            e.x[i * 3 + 0] = 1.0f;
            e.x[i * 3 + 1] = (float)(i % 20);
            e.x[i * 3 + 2] = f && e.view[i] ? (float)((i * 7) % 5) : 0.0f; /* B's queries are perturbed */
        }
        cr_assert_eq(emb_save(f ? b : a, &e), ER_OK);
        emb_free(&e);
    }
    fflush(stdout);
    char *argv[] = {"eval", "compare", a, b, "--ref-view", "0", "--json", NULL};
    cr_assert_eq(cmd_eval(7, argv), ER_OK, "%s", er_msg());
    char *one[] = {"eval", "compare", a, "--ref-view", "0", NULL};
    cr_assert_eq(cmd_eval(5, one), ER_INPUT);
    cr_assert(strstr(er_msg(), "two embedding files"), "%s", er_msg());
    free(a);
    free(b);
}

/* the mean of 0/1 values resampled: the binomial distribution again (Recall@k, classification accuracy) */
Test(infer_stats, mean_interval_is_the_binomial_bootstrap_distribution) {
    double v[REF_ACC_N];
    for (int i = 0; i < REF_ACC_N; i++) v[i] = (i * 7) % REF_ACC_N < REF_ACC_HITS;
    double lo, hi;
    bootstrap_mean_interval(v, REF_ACC_N, 4000, 11, &lo, &hi);
    cr_expect(fabs(lo - REF_ACC_LO) <= 0.0051, "low %g vs binomial %g", lo, REF_ACC_LO);
    cr_expect(fabs(hi - REF_ACC_HI) <= 0.0051, "high %g vs binomial %g", hi, REF_ACC_HI);
    bootstrap_mean_interval(v, REF_ACC_N, 0, 11, &lo, &hi);
    cr_expect(isnan(lo) && isnan(hi));
}
