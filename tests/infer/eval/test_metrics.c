/* Metrics against hand-worked examples and against values computed independently in Python
 * (tests/infer/eval/make_metric_refs.py: numpy re-implementation of the ISC2021 metrics, sklearn
 * roc_auc_score and average_precision_score). Also the kNN votes and the CV fold helpers. */
#include "tests/test_util.h"
#include "infer/retrieval/knn.h"
#include "infer/eval/metrics.h"
#include "nn/base/base.h"

#include <math.h>
#include <string.h>

static char *data_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "tests/infer/data/%s", name);
    return buf;
}

Test(infer_metrics, reid_hand_worked) {
    /* sorted: .9 TP, .8 FP, .7 FP (FP first among ties), .7 TP, .5 FP;  |G| = 3
     * P = 1, 1/2, 1/3, 1/2, 2/5;  R = 1/3, 1/3, 1/3, 2/3, 2/3
     * uAP = 1/3 * 1 + 1/3 * 1/2 = 0.5;  R@P90 = 1/3 (only the first cut has P >= 0.9)
     * Acc@1: (1,10) rank 0; (2,20) ties with (2,21) -> rank 1; (3,30) never predicted -> 1/3 */
    reid_pred p[] = {{1, 10, 0.9}, {1, 11, 0.8}, {2, 21, 0.7}, {2, 20, 0.7}, {3, 31, 0.5}};
    reid_gt g[] = {{1, 10}, {2, 20}, {3, 30}};
    reid_result r;
    cr_assert_eq(reid_metrics(p, 5, g, 3, &r), ER_OK);
    cr_expect_float_eq(r.uap, 0.5, 1e-12);
    cr_expect_float_eq(r.acc1, 1.0 / 3, 1e-12);
    cr_expect_float_eq(r.recall_p90, 1.0 / 3, 1e-12);
    cr_expect_float_eq(r.thr_p90, 0.9, 1e-12);
    /* no cut reaches precision 0.9 -> 0 */
    reid_pred p2[] = {{1, 11, 0.9}, {1, 10, 0.8}};
    cr_assert_eq(reid_metrics(p2, 2, g, 3, &r), ER_OK);
    cr_expect_eq(r.recall_p90, 0.0);
    cr_expect_eq(r.has_p90, 0);
    cr_expect_float_eq(r.uap, (1.0 / 3) * 0.5, 1e-12);
    /* duplicate prediction rejected */
    reid_pred p3[] = {{1, 10, 0.9}, {1, 10, 0.8}};
    cr_expect_eq(reid_metrics(p3, 2, g, 3, &r), ER_INPUT);
    cr_expect(strstr(er_msg(), "duplicate") != NULL);
}

Test(infer_metrics, reid_matches_python_reference) {
    FILE *f = fopen(data_path("reid_preds.csv"), "r");
    cr_assert(f, "missing reference file (run from the repo root)");
    reid_pred p[400];
    int np = 0;
    char line[128];
    fgets(line, sizeof line, f);
    while (fgets(line, sizeof line, f) && np < 400) {
        long long q, r; double s;
        cr_assert_eq(sscanf(line, "%lld,%lld,%lf", &q, &r, &s), 3);
        p[np++] = (reid_pred){q, r, s};
    }
    fclose(f);
    f = fopen(data_path("reid_gt.csv"), "r");
    reid_gt g[100];
    int ng = 0;
    fgets(line, sizeof line, f);
    while (fgets(line, sizeof line, f) && ng < 100) {
        long long q, r;
        cr_assert_eq(sscanf(line, "%lld,%lld", &q, &r), 2);
        g[ng++] = (reid_gt){q, r};
    }
    fclose(f);
    double uap, acc1, rp90;
    f = fopen(data_path("reid_expected.csv"), "r");
    fgets(line, sizeof line, f);
    cr_assert_eq(fscanf(f, "%lf,%lf,%lf", &uap, &acc1, &rp90), 3);
    fclose(f);
    reid_result r;
    cr_assert_eq(reid_metrics(p, np, g, ng, &r), ER_OK);
    cr_expect_float_eq(r.uap, uap, 1e-9, "uAP %.12f vs python %.12f", r.uap, uap);
    cr_expect_float_eq(r.acc1, acc1, 1e-9);
    cr_expect_float_eq(r.recall_p90, rp90, 1e-9);
}

Test(infer_metrics, ranked_ap_and_recall_at_k) {
    uint8_t rel[5] = {1, 0, 1, 0, 0};
    cr_expect_float_eq(ap_ranked(rel, 5, 3, 0), (1.0 + 2.0 / 3) / 3, 1e-12); /* third relevant never retrieved */
    cr_expect_float_eq(ap_ranked(rel, 5, 3, 2), 1.0 / 2, 1e-12);             /* AP@2: / min(3, 2) */
    cr_expect(isnan(ap_ranked(rel, 5, 0, 0)));
    cr_expect_eq(hit_at_k(rel, 5, 1), 1);
    uint8_t rel2[4] = {0, 0, 1, 0};
    cr_expect_eq(hit_at_k(rel2, 4, 2), 0);
    cr_expect_eq(hit_at_k(rel2, 4, 3), 1);
    /* against sklearn average_precision_score on full rankings */
    FILE *f = fopen(data_path("ranked_ap.csv"), "r");
    cr_assert(f);
    char line[256];
    fgets(line, sizeof line, f);
    int lists = 0;
    while (fgets(line, sizeof line, f)) {
        int id; char flags[128]; double want;
        cr_assert_eq(sscanf(line, "%d,%127[01],%lf", &id, flags, &want), 3);
        int n = (int)strlen(flags);
        uint8_t r[128];
        int64_t nrel = 0;
        for (int i = 0; i < n; i++) { r[i] = flags[i] == '1'; nrel += r[i]; }
        cr_expect_float_eq(ap_ranked(r, n, nrel, 0), want, 1e-9, "list %d", id);
        lists++;
    }
    fclose(f);
    cr_expect_eq(lists, 20);
}

Test(infer_metrics, confusion_accuracy_f1) {
    int truth[] = {0, 0, 1, 1, 1, 2, -1}, pred[] = {0, 1, 1, 1, 0, 2, 0};
    int64_t conf[9];
    confusion_matrix(truth, pred, 7, 3, conf);
    int64_t want[9] = {1, 1, 0, 1, 2, 0, 0, 0, 1};
    cr_expect_eq(memcmp(conf, want, sizeof want), 0);
    cr_expect_float_eq(accuracy_from_confusion(conf, 3), 4.0 / 6, 1e-12);
    cr_expect_float_eq(f1_from_confusion(conf, 3, 1), 2.0 * 2 / (2 * 2 + 1 + 1), 1e-12);
    cr_expect_float_eq(f1_from_confusion(conf, 3, -1), (0.5 + 2.0 / 3 + 1.0) / 3, 1e-12);
}

Test(infer_metrics, roc_auc_hand_and_sklearn) {
    double s1[] = {0.1, 0.4, 0.35, 0.8};
    int t1[] = {0, 0, 1, 1};
    cr_expect_float_eq(roc_auc(s1, t1, 4), 0.75, 1e-12);
    double s2[] = {0.5, 0.5, 0.5, 0.9}; /* ties count one half */
    int t2[] = {0, 1, 0, 1};
    cr_expect_float_eq(roc_auc(s2, t2, 4), 0.75, 1e-12);
    int t3[] = {1, 1, 1, 1};
    cr_expect(isnan(roc_auc(s2, t3, 4)));
    FILE *f = fopen(data_path("auc.csv"), "r");
    cr_assert(f);
    char line[128];
    double s[300], want = -1;
    int t[300], n = 0;
    fgets(line, sizeof line, f);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "expected,", 9)) { want = atof(line + 9); break; }
        cr_assert_eq(sscanf(line, "%d,%lf", &t[n], &s[n]), 2);
        n++;
    }
    fclose(f);
    cr_expect_float_eq(roc_auc(s, t, n), want, 1e-9, "AUC %.12f vs sklearn %.12f", roc_auc(s, t, n), want);
}

Test(infer_metrics, knn_majority_tie_rules) {
    double sc[3];
    int64_t a[6] = {1, 0, 0, 1, 2, 2}; /* three-way tie: the nearest neighbour's label */
    cr_expect_eq(knn_majority(a, 6, 3, sc), 1);
    cr_expect_float_eq(sc[0], 1.0 / 3, 1e-12);
    int64_t b[6] = {2, 0, 1, 1, 0, -1}; /* 0 and 1 tie; 2 is nearest but not tied: first tied in rank = 0 */
    cr_expect_eq(knn_majority(b, 6, 3, sc), 0);
    cr_expect_float_eq(sc[2], 1.0 / 5, 1e-12); /* the unknown label does not vote */
    int64_t c[3] = {2, 1, 1};
    cr_expect_eq(knn_majority(c, 3, 3, sc), 1);
    int64_t d[2] = {-1, -1};
    cr_expect_eq(knn_majority(d, 2, 3, sc), -1);
}

Test(infer_metrics, knn_weighted_vote) {
    double sc[2];
    int64_t a[3] = {0, 1, 1};
    double s1[3] = {0.9, 0.5, 0.45};
    cr_expect_eq(knn_weighted(a, s1, 3, 2, 0.1, sc), 0); /* e^9 beats e^5 + e^4.5 */
    double z = exp(9.0) + exp(5.0) + exp(4.5);
    cr_expect_float_eq(sc[0], exp(9.0) / z, 1e-12);
    cr_expect_float_eq(sc[1], (exp(5.0) + exp(4.5)) / z, 1e-12);
    double s2[3] = {0.5, 0.5, 0.5};
    cr_expect_eq(knn_weighted(a, s2, 3, 2, 0.1, sc), 1); /* equal weights: plain majority */
    cr_expect_float_eq(hamming_similarity(16, 64), 0.5, 1e-12);
}

Test(infer_metrics, stratified_folds) {
    int n = 103, label[103], fold[103], fold2[103];
    for (int i = 0; i < n; i++) label[i] = i % 7 == 0 ? 1 : i % 13 == 0 ? 2 : 0;
    folds_stratified(label, n, 5, 42, fold);
    folds_stratified(label, n, 5, 42, fold2);
    cr_expect_eq(memcmp(fold, fold2, sizeof fold), 0, "same seed, same folds");
    int cnt[3][5] = {{0}}, tot[5] = {0};
    for (int i = 0; i < n; i++) { cr_assert(fold[i] >= 0 && fold[i] < 5); cnt[label[i]][fold[i]]++; tot[fold[i]]++; }
    for (int c = 0; c < 3; c++) {
        int lo = 1 << 30, hi = 0;
        for (int f = 0; f < 5; f++) { if (cnt[c][f] < lo) lo = cnt[c][f]; if (cnt[c][f] > hi) hi = cnt[c][f]; }
        cr_expect_leq(hi - lo, 1, "class %d spread over folds %d..%d", c, lo, hi);
    }
    for (int f = 1; f < 5; f++) cr_expect_leq(abs(tot[f] - tot[0]), 1);
}

Test(infer_metrics, grouped_folds_keep_groups_together) {
    int n = 200, group[200], fold[200];
    for (int i = 0; i < n; i++) group[i] = i < 190 ? (i * 37) % 23 : -1; /* 23 patients + 10 unknown */
    folds_grouped(group, n, 5, 3, fold);
    int gf[23];
    for (int g = 0; g < 23; g++) gf[g] = -1;
    int tot[5] = {0};
    for (int i = 0; i < n; i++) {
        cr_assert(fold[i] >= 0 && fold[i] < 5);
        tot[fold[i]]++;
        if (group[i] < 0) continue;
        if (gf[group[i]] < 0) gf[group[i]] = fold[i];
        cr_expect_eq(gf[group[i]], fold[i], "patient %d split across folds", group[i]);
    }
    for (int f = 0; f < 5; f++) cr_expect(tot[f] >= 30 && tot[f] <= 50, "fold %d has %d items", f, tot[f]);
}

Test(infer_metrics, sensitivity_from_confusion_by_hand) {
    int truth[] = {0, 0, 0, 1, 1, 2}, pred[] = {0, 1, 0, 1, 1, 0};
    int64_t conf[16];
    confusion_matrix(truth, pred, 6, 4, conf); /* class 3 has no row */
    cr_expect_float_eq(sensitivity_from_confusion(conf, 4, 0), 2.0 / 3, 1e-12);
    cr_expect_float_eq(sensitivity_from_confusion(conf, 4, 1), 1.0, 1e-12);
    cr_expect_float_eq(sensitivity_from_confusion(conf, 4, 2), 0.0, 1e-12);
    cr_expect(isnan(sensitivity_from_confusion(conf, 4, 3)), "a class without rows has no sensitivity");
}
