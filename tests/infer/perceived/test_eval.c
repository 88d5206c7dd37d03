/* Distances, Likert-level histograms, Bhattacharyya, and sparse recall on a hand-made example. */
#include <math.h>

#include "infer/perceived/perceived_eval.h"
#include "nn/base/base.h"
#include "tests/test_util.h"

Test(perceived_eval, bhattacharyya_values) {
    double p[] = {1, 1}, q[] = {1, 3}, a[] = {1, 0}, b[] = {0, 2}, z[] = {0, 0};
    cr_assert_float_eq(bhattacharyya(p, q, 2), -log(sqrt(0.5 * 0.25) + sqrt(0.5 * 0.75)), 1e-12);
    cr_assert_float_eq(bhattacharyya(p, p, 2), 0.0, 1e-12);
    cr_assert(isinf(bhattacharyya(a, b, 2)));
    cr_assert(isnan(bhattacharyya(a, z, 2)));
}

Test(perceived_eval, distances) {
    float x[] = {1, 0, 3, 0, 0, 2, 1, 1};
    pdist_set p;
    cr_assert_eq(pdist_prepare(&p, x, 4, 2, PD_COSINE), ER_OK);
    cr_assert_float_eq(pdist_ij(&p, 0, 1), 0.0, 1e-7);
    cr_assert_float_eq(pdist_ij(&p, 0, 2), 1.0, 1e-7);
    cr_assert_float_eq(pdist_ij(&p, 0, 3), 1.0 - sqrt(0.5), 1e-6);
    pdist_free(&p);
    float h[] = {0.5f, 0.5f, 0.f, 1.f};
    cr_assert_eq(pdist_prepare(&p, h, 2, 2, PD_CHI2), ER_OK);
    cr_assert_float_eq(pdist_ij(&p, 0, 1), 0.25 / 0.5 + 0.25 / 1.5, 1e-6);
    pdist_free(&p);
    float neg[] = {-1.f, 1.f};
    cr_assert_eq(pdist_prepare(&p, neg, 1, 2, PD_CHI2), ER_INPUT);
    float s[] = {1, -1, 2, 1, 1, 1};
    cr_assert_eq(pdist_prepare(&p, s, 2, 3, PD_HAMMING), ER_OK);
    cr_assert_float_eq(pdist_ij(&p, 0, 1), 1.0, 0);
    pdist_free(&p);
}

/* Five unit vectors at 0, 10, 30, 90, 100 degrees. Couples: (0,2) +2; (1,4) +1; (3,4) +1 and -1
 * (mean 0); (0,3) -2. Ranks by hand: (0,2): b is 2nd from a and a 2nd from b -> 2; (1,4): 4th from
 * 1, 3rd from 4 -> 3; (3,4): 1. */
Test(perceived_eval, sparse_recall_hand_made) {
    const double deg[] = {0, 10, 30, 90, 100};
    float x[10];
    int64_t ids[5];
    for (int i = 0; i < 5; i++) { x[2 * i] = cos(deg[i] * M_PI / 180); x[2 * i + 1] = sin(deg[i] * M_PI / 180); ids[i] = 100 + i; }
    likert_gt g;
    cr_assert_eq(likert_parse("100,102,2,o\n101,104,1,o\n103,104,1,o\n104,103,-1,p\n100,103,-2,o\n", "t", &g), ER_OK);
    int *ia, *ib;
    cr_assert_eq(likert_index_pairs(&g, ids, 5, "ids", &ia, &ib), ER_OK);
    pdist_set p;
    pdist_prepare(&p, x, 5, 2, PD_COSINE);
    double rec[3 * 4];
    int npos[3];
    sparse_recall(&g, ia, ib, &p, NULL, 4, rec, npos);
    cr_assert(npos[0] == 1 && npos[1] == 2 && npos[2] == 2, "%d %d %d", npos[0], npos[1], npos[2]);
    const double e2[] = {0, 1, 1, 1}, e1[] = {0.5, 0.5, 1, 1}, es[] = {0, 0.5, 1, 1};
    for (int k = 0; k < 4; k++) {
        cr_assert_float_eq(rec[k], e2[k], 1e-12, "+2 at k=%d: %f", k + 1, rec[k]);
        cr_assert_float_eq(rec[4 + k], e1[k], 1e-12, "+1 at k=%d", k + 1);
        cr_assert_float_eq(rec[8 + k], es[k], 1e-12, "S at k=%d", k + 1);
    }
    /* items 0 and 1 from the same patient: 1 is no longer a candidate of 0, so (0,2) is found at 1 */
    int64_t group[] = {7, 7, 8, 9, 9};
    sparse_recall(&g, ia, ib, &p, group, 4, rec, npos);
    cr_assert_float_eq(rec[0], 1.0, 1e-12);
    /* spec §3.4 variant, ranking only the scored candidates of each query (worked out by hand:
     * queries 0, 2, 1 find their positive first, query 4 ranks the negative 3 before the positive
     * 1; query 3 has no positive) */
    double curve[2];
    int nq;
    double auc = sparse_recall_scored(&g, ia, ib, &p, NULL, 2, curve, &nq);
    cr_assert(nq == 4 && curve[0] == 0.75 && curve[1] == 1.0 && auc == 0.875, "nq %d curve %f %f", nq, curve[0], curve[1]);
    sparse_recall_scored(&g, ia, ib, &p, group, 2, curve, &nq);
    cr_assert(nq == 4 && curve[0] == 1.0 && curve[1] == 1.0);
    /* histograms: one judgement per record, at its pair's distance */
    double dist[4];
    for (int k = 0; k < g.npairs; k++) dist[k] = pdist_ij(&p, ia[k], ib[k]);
    double lo = 0, hi = 0, cnt[4 * 2];
    likert_level_hist(&g, dist, 2, &lo, &hi, cnt);
    cr_assert(cnt[0 * 2 + 1] == 1 && cnt[1 * 2 + 0] == 1 && cnt[2 * 2 + 0] == 1 && cnt[2 * 2 + 1] == 1 && cnt[3 * 2 + 0] == 1);
    pdist_free(&p);
    free(ia); free(ib);
    likert_free(&g);
}
