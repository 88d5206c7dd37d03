/* `endoret eval retrieval --base-query/--base-ref`: the paired mAP difference of a model and a
 * baseline on the same query and gallery rows, checked against APs worked out by hand (issue 34). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/bootstrap.h"
#include "infer/retrieval/embeddings.h"
#include "nn/base/base.h"
#include "tests/test_capture.h"
#include "tests/test_util.h"

int cmd_eval(int argc, char **argv);

/* n unit vectors at the given angles (degrees), labelled "a" / "b" by lab[i], ids 100 + i */
static void save_at(const char *path, const double *deg, const int *lab, int n) {
    emb_set e;
    emb_alloc(&e, n, 2);
    e.labels = xmalloc(sizeof(int64_t) * n);
    e.nlabel_names = 2;
    e.label_names = xmalloc(sizeof(char *) * 2);
    e.label_names[0] = xstrdup("a"), e.label_names[1] = xstrdup("b");
    for (int i = 0; i < n; i++) {
        e.x[2 * i] = (float)cos(deg[i] * M_PI / 180), e.x[2 * i + 1] = (float)sin(deg[i] * M_PI / 180);
        e.labels[i] = lab[i];
        e.ids[i] = 100 + i;
    }
    cr_assert_eq(emb_save(path, &e), ER_OK);
    emb_free(&e);
}

/* Gallery: a at 0 and 20 degrees, b at 90 and 110. Model A: query a at 5 (ranks a0 a1 b b: AP 1),
 * query b at 95 (b b a a: AP 1), mAP 1. Baseline: query a at 60 (cosine ranks b@90 (30 deg),
 * a@20 (40), b@110 (50), a@0 (60): relevant at ranks 2 and 4, AP (1/2 + 2/4) / 2 = 0.5), query b
 * at 95 (AP 1), mAP 0.75. Per-query differences A - base: 0.5, 0; mean 0.25. */
Test(eval_retrieval_paired, difference_matches_aps_worked_by_hand) {
    const char *dir = test_tmpdir();
    char g[300], qa[300], qb[300];
    snprintf(g, sizeof g, "%s/gallery.safetensors", dir);
    snprintf(qa, sizeof qa, "%s/qa.safetensors", dir);
    snprintf(qb, sizeof qb, "%s/qb.safetensors", dir);
    const double gdeg[] = {0, 20, 90, 110}, adeg[] = {5, 95}, bdeg[] = {60, 95};
    const int glab[] = {0, 0, 1, 1}, qlab[] = {0, 1};
    save_at(g, gdeg, glab, 4);
    save_at(qa, adeg, qlab, 2);
    save_at(qb, bdeg, qlab, 2);
    char *argv[] = {"eval", "retrieval", "--query", qa, "--ref", g, "--base-query", qb, "--base-ref", g, "--json", NULL};
    char *text;
    int rc = test_capture_stdout(cmd_eval, 11, argv, &text);
    cr_assert_eq(rc, ER_OK, "%s", er_msg());
    cr_assert_float_eq(test_json_num(text, "mAP"), 1.0, 1e-9, "%s", text);
    cr_assert_float_eq(test_json_num(text, "base_mAP"), 0.75, 1e-9, "%s", text);
    cr_assert_float_eq(test_json_num(text, "delta"), 0.25, 1e-9, "%s", text);
    cr_assert_eq((int)test_json_num(text, "better"), 1, "%s", text);
    cr_assert_eq((int)test_json_num(text, "worse"), 0, "%s", text);
    /* the interval is the bootstrap of the per-query differences (0.5, 0): replicate means 0, 0.25
     * or 0.5, so over 1000 replicates the 2.5th / 97.5th percentiles are the extremes */
    double d[2] = {0.5, 0}, lo, hi;
    bootstrap_mean_interval(d, 2, BOOTSTRAP_DEFAULT_N, BOOTSTRAP_SEED, &lo, &hi);
    cr_assert_float_eq(lo, 0.0, 1e-12);
    cr_assert_float_eq(hi, 0.5, 1e-12);
    cr_assert_float_eq(test_json_num(text, "delta_lo"), lo, 1e-6, "%s", text);
    cr_assert_float_eq(test_json_num(text, "delta_hi"), hi, 1e-6, "%s", text);
    free(text);
    /* swapped: the baseline is the better model, the difference is negative */
    char *sw[] = {"eval", "retrieval", "--query", qb, "--ref", g, "--base-query", qa, "--base-ref", g, "--json", NULL};
    rc = test_capture_stdout(cmd_eval, 11, sw, &text);
    cr_assert_eq(rc, ER_OK, "%s", er_msg());
    cr_assert_float_eq(test_json_num(text, "delta"), -0.25, 1e-9, "%s", text);
    cr_assert_float_eq(test_json_num(text, "delta_lo"), -0.5, 1e-6, "%s", text);
    cr_assert_float_eq(test_json_num(text, "delta_hi"), 0.0, 1e-6, "%s", text);
    free(text);
}

Test(eval_retrieval_paired, other_rows_or_half_a_baseline_are_refused) {
    const char *dir = test_tmpdir();
    char g[300], q[300], other[300];
    snprintf(g, sizeof g, "%s/gallery.safetensors", dir);
    snprintf(q, sizeof q, "%s/q.safetensors", dir);
    snprintf(other, sizeof other, "%s/other.safetensors", dir);
    const double gdeg[] = {0, 20, 90, 110}, qdeg[] = {5, 95};
    const int glab[] = {0, 0, 1, 1}, qlab[] = {0, 1}, swapped[] = {1, 0};
    save_at(g, gdeg, glab, 4);
    save_at(q, qdeg, qlab, 2);
    save_at(other, qdeg, swapped, 2); /* the same count, other labels */
    char *half[] = {"eval", "retrieval", "--query", q, "--ref", g, "--base-query", q, NULL};
    cr_expect_eq(cmd_eval(8, half), ER_INPUT);
    cr_expect(strstr(er_msg(), "--base-ref"), "%s", er_msg());
    char *rows[] = {"eval", "retrieval", "--query", q, "--ref", g, "--base-query", other, "--base-ref", g, NULL};
    cr_expect_eq(cmd_eval(10, rows), ER_INPUT);
    cr_expect(strstr(er_msg(), other) && strstr(er_msg(), "same rows"), "%s", er_msg());
    char *count[] = {"eval", "retrieval", "--query", q, "--ref", g, "--base-query", q, "--base-ref", q, NULL};
    cr_expect_eq(cmd_eval(10, count), ER_INPUT);
    cr_expect(strstr(er_msg(), "same rows"), "%s", er_msg());
}
