/* The command-line interfaces other parts rely on (exact JSON shapes), the multi-view protocol on
 * a hand-built example, the SVG writer and the sweep. */
#include "tests/test_capture.h"
#include "infer/retrieval/embeddings.h"
#include "infer/eval/multiview.h"
#include "infer/eval/sweep.h"
#include "infer/eval/synth_emb.h"
#include "nn/base/base.h"
#include "nn/base/json.h"

#include <math.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

int cmd_index(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench_search(int argc, char **argv);
int cmd_classify(int argc, char **argv);

/* run a command with stdout captured into a file; returns its status, output in *out */
static int capture(int (*fn)(int, char **), int argc, char **argv, char **out) {
    return test_capture_stdout(fn, argc, argv, out);
}

static void write_sets(const char *dir, char **dbp, char **qp, char **gtp, int n, int nq, int dim) {
    emb_set db, q;
    int64_t match[64];
    synth_emb_cfg c = {n, nq, dim, 8, 0.9, 0.3, 0.1, 9};
    synth_emb_make(&c, &db, &q, match);
    for (int i = 0; i < nq; i++) q.ids[i] = 1000 + i; /* query ids distinct from row numbers */
    *dbp = path_join(dir, "db.safetensors");
    *qp = path_join(dir, "q.safetensors");
    *gtp = path_join(dir, "gt.csv");
    cr_assert_eq(emb_save(*dbp, &db), ER_OK);
    cr_assert_eq(emb_save(*qp, &q), ER_OK);
    FILE *f = fopen(*gtp, "w");
    fprintf(f, "query_id,reference_id\n");
    for (int i = 0; i < nq; i++) fprintf(f, "%d,%lld\n", 1000 + i, (long long)match[i]);
    fclose(f);
    emb_free(&db);
    emb_free(&q);
}

Test(infer_cli, index_build_search_json_lines) {
    const char *dir = test_tmpdir();
    char *dbp, *qp, *gtp, *out, *idx = path_join(dir, "cases.db");
    write_sets(dir, &dbp, &qp, &gtp, 300, 12, 64);
    char *build[] = {"index", "build", "--emb", dbp, "--out", idx, "--bits", "32", "--kind", "mih", NULL};
    cr_assert_eq(capture(cmd_index, 10, build, &out), ER_OK, "%s", er_msg());
    free(out);
    char *search[] = {"search", "--index", idx, "--query", qp, "--k", "4", "--json", NULL};
    cr_assert_eq(capture(cmd_search, 8, search, &out), ER_OK, "%s", er_msg());
    int lines = 0;
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), lines++) {
        json_value v;
        cr_assert_eq(json_parse(l, strlen(l), "search output", &v), ER_OK, "not JSON: %s", l);
        const json_value *qv = json_get(&v, "query"), *ids = json_get(&v, "ids"), *d = json_get(&v, "distances");
        cr_assert(qv && ids && d, "missing keys in %s", l);
        cr_expect_eq((long long)qv->number, 1000 + lines);
        cr_expect_eq(ids->n, 4);
        cr_expect_eq(d->n, 4);
        for (int j = 1; j < d->n; j++) cr_expect_leq(d->items[j - 1].number, d->items[j].number, "nearest first");
        json_free(&v);
    }
    cr_expect_eq(lines, 12);
    free(out);
    /* mismatched dimensions */
    emb_set bad;
    emb_alloc(&bad, 3, 10);
    char *badp = path_join(dir, "bad.safetensors");
    cr_assert_eq(emb_save(badp, &bad), ER_OK);
    emb_free(&bad);
    char *s2[] = {"search", "--index", idx, "--query", badp, NULL};
    cr_expect_eq(capture(cmd_search, 5, s2, &out), ER_INPUT);
    cr_expect(strstr(er_msg(), "10-d") != NULL, "%s", er_msg());
    free(out);
    free(dbp); free(qp); free(gtp); free(idx); free(badp);
}

/* issue 17 #11: `classify` on a database with no cases printed "accuracy nan" and exited 0. */
Test(infer_cli, classify_on_an_empty_database_is_refused) {
    const char *dir = test_tmpdir();
    char *dbp, *qp, *gtp, *out = NULL, *idx = path_join(dir, "cases.db");
    write_sets(dir, &dbp, &qp, &gtp, 40, 4, 16);
    char *build[] = {"index", "build", "--emb", dbp, "--out", idx, NULL};
    cr_assert_eq(capture(cmd_index, 6, build, &out), ER_OK, "%s", er_msg());
    free(out);
    sqlite3 *s;
    sqlite3_open(idx, &s);
    cr_assert_eq(sqlite3_exec(s, "DELETE FROM cases;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(s);
    char *cls[] = {"classify", "--index", idx, "--query", qp, NULL};
    cr_expect_eq(capture(cmd_classify, 5, cls, &out), ER_INPUT, "%s", out);
    cr_expect(strstr(er_msg(), idx) && strstr(er_msg(), "no cases"), "%s", er_msg());
    free(out);
    free(dbp), free(qp), free(gtp), free(idx);
}

Test(infer_cli, eval_reid_json_and_values) {
    const char *dir = test_tmpdir();
    char *dbp, *qp, *gtp, *out;
    write_sets(dir, &dbp, &qp, &gtp, 200, 30, 32);
    char *argv[] = {"eval", "reid", "--query", qp, "--ref", dbp, "--gt", gtp, "--json", NULL};
    cr_assert_eq(capture(cmd_eval, 9, argv, &out), ER_OK, "%s", er_msg());
    json_value v;
    cr_assert_eq(json_parse(out, strlen(out), "eval output", &v), ER_OK, "%s", out);
    const json_value *u = json_get(&v, "uAP"), *a = json_get(&v, "acc1"), *r = json_get(&v, "recall_p90");
    cr_assert(u && a && r, "%s", out);
    /* low query noise: every query's source is its nearest reference */
    cr_expect_float_eq(a->number, 1.0, 1e-9, "%s", out);
    cr_expect(u->number > 0.9 && u->number <= 1.0, "%s", out);
    json_free(&v);
    free(out);
    /* malformed GT */
    FILE *f = fopen(gtp, "w");
    fprintf(f, "query_id,reference_id\n1000,abc\n");
    fclose(f);
    cr_expect_eq(capture(cmd_eval, 9, argv, &out), ER_INPUT);
    cr_expect(strstr(er_msg(), "line 2") != NULL, "%s", er_msg());
    free(out);
    free(dbp); free(qp); free(gtp);
}

Test(infer_cli, bench_search_json_one_line_per_index) {
    char *out;
    char *argv[] = {"search", "--n", "20000", "--queries", "20", "--dim", "64", "--json", NULL};
    cr_assert_eq(capture(cmd_bench_search, 8, argv, &out), ER_OK, "%s", er_msg());
    const char *want[4] = {"float", "scan", "balltree", "mih"};
    int i = 0;
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), i++) {
        json_value v;
        cr_assert_eq(json_parse(l, strlen(l), "bench", &v), ER_OK, "%s", l);
        cr_assert_lt(i, 4);
        cr_expect_str_eq(json_get(&v, "index")->string, want[i]);
        cr_expect_gt(json_get(&v, "ms_per_query")->number, 0);
        if (i >= 2) cr_expect_eq(json_get(&v, "mismatches_vs_scan")->number, 0);
        json_free(&v);
    }
    cr_expect_eq(i, 4);
    free(out);
}

/* 3 scenes in 3-d: views R1, R2, Q2 lie on the scene's axis; Q1 of scene 0 leans towards scene 1.
 * Q1 alone vs R1: scene 0's query finds scene 1 -> Acc@1 2/3; averaging Q1 and Q2 fixes it. */
Test(infer_multiview, hand_built_scenes) {
    emb_set e;
    emb_alloc(&e, 12, 3);
    e.scene = malloc(12 * 8);
    e.view = malloc(12 * 8);
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 4; v++) {
            int i = s * 4 + v;
            e.scene[i] = s;
            e.view[i] = v;
            e.x[i * 3 + s] = 1.0f;
        }
    e.x[0 * 3 + 0] = 0.6f; /* scene 0, Q1 = (0.6, 1, 0): closer to scene 1's axis */
    e.x[0 * 3 + 1] = 1.0f;
    mv_row rows[9];
    cr_assert_eq(multiview_eval(&e, 1, 0, 0, rows), ER_OK, "%s", er_msg());
    for (int o = 0; o < 9; o++) {
        cr_expect_eq(rows[o].nscenes, 3);
        int q1_only = rows[o].qmask == 1;
        cr_expect_float_eq(rows[o].r.acc1, q1_only ? 2.0 / 3 : 1.0, 1e-12, "setting q%d r%d", rows[o].qmask, rows[o].rmask);
    }
    /* Q1-R1, one prediction per query: sorted scores: two correct at distance 0, the wrong one last
     * -> uAP = 2/3, R@P90 = 2/3 */
    cr_expect_eq(rows[0].qmask, 1);
    cr_expect_eq(rows[0].rmask, 1);
    cr_expect_float_eq(rows[0].r.uap, 2.0 / 3, 1e-9);
    cr_expect_float_eq(rows[0].r.recall_p90, 2.0 / 3, 1e-9);
    /* a scene missing view R2 drops out of the settings that need R2 only */
    e.view[3] = 7;
    cr_assert_eq(multiview_eval(&e, 1, 0, 0, rows), ER_OK);
    for (int o = 0; o < 9; o++) cr_expect_eq(rows[o].nscenes, rows[o].rmask & 2 ? 2 : 3);
    free(e.scene); e.scene = NULL;
    cr_expect_eq(multiview_eval(&e, 1, 0, 0, rows), ER_INPUT);
    emb_free(&e);
}

Test(infer_sweep, kinds_agree_and_float_row_is_exact) {
    SLOW_TEST();
    emb_set db, q;
    int64_t match[100];
    synth_emb_cfg c = {1500, 100, 32, 20, 0.9, 0.0, 0.1, 2}; /* queries = exact copies */
    synth_emb_make(&c, &db, &q, match);
    reid_gt gt[100];
    for (int i = 0; i < 100; i++) gt[i] = (reid_gt){q.ids[i], match[i]};
    int bits[2] = {8, 32}, ks[2] = {1, 6};
    sweep_row a[6], b[6];
    cr_assert_eq(sweep_run(&db, &q, gt, 100, bits, 2, ks, 2, HASH_PCA, INDEX_MIH, 0, 0, a), ER_OK, "%s", er_msg());
    cr_assert_eq(sweep_run(&db, &q, gt, 100, bits, 2, ks, 2, HASH_PCA, INDEX_BALLTREE, 0, 0, b), ER_OK);
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(a[i].uap, b[i].uap);
        cr_expect_eq(a[i].knn_acc, b[i].knn_acc);
        cr_expect_eq(a[i].knn_auc, b[i].knn_auc);
    }
    cr_expect_eq(a[0].bits, 0);
    cr_expect_float_eq(a[0].acc1, 1.0, 1e-12, "float search finds exact copies");
    cr_expect_float_eq(a[4].acc1, 1.0, 1e-12, "32-bit sign codes of exact copies: distance 0 ... ");
    cr_expect_leq(a[2].acc1, a[4].acc1, "8 bits cannot beat 32 bits on exact copies");
    int bad[1] = {64};
    cr_expect_eq(sweep_run(&db, &q, gt, 100, bad, 1, ks, 2, HASH_PCA, INDEX_MIH, 0, 0, a), ER_INPUT);
    emb_free(&db);
    emb_free(&q);
}

int cmd_sweep(int argc, char **argv);

/* issue 30 F6: a --db the hasher cannot fit (all zeros; one row) freed an index never built (exit
 * 139); now one message, exit 2. */
Test(infer_sweep, a_database_the_hasher_cannot_fit_is_refused) {
    const char *dir = test_tmpdir();
    char *dbp, *qp, *gtp, *out = NULL;
    write_sets(dir, &dbp, &qp, &gtp, 40, 4, 16);
    emb_set z;
    emb_alloc(&z, 20, 16);
    char *zp = path_join(dir, "zeros.safetensors");
    cr_assert_eq(emb_save(zp, &z), ER_OK);
    emb_free(&z);
    emb_alloc(&z, 1, 16);
    z.x[0] = 1;
    char *onep = path_join(dir, "one.safetensors");
    cr_assert_eq(emb_save(onep, &z), ER_OK);
    emb_free(&z);
    char *a1[] = {"sweep", "--db", zp, "--query", dbp, "--bits", "8", "--k", "1", NULL};
    cr_expect_eq(capture(cmd_sweep, 9, a1, &out), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), zp) && strstr(er_msg(), "hash"), "%s", er_msg());
    free(out);
    char *a2[] = {"sweep", "--db", onep, "--query", dbp, "--bits", "8", "--k", "1", NULL};
    cr_expect_eq(capture(cmd_sweep, 9, a2, &out), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), onep) && strstr(er_msg(), "2 training"), "%s", er_msg());
    free(out);
    free(dbp), free(qp), free(gtp), free(zp), free(onep);
}

/* issue 30 F15: --label-noise 2 (a probability) was taken as it was. */
Test(infer_sweep, synthetic_label_noise_is_a_probability) {
    char *out = NULL;
    char *a[] = {"sweep", "--synthetic", "--n", "100", "--queries", "5", "--dim", "8", "--label-noise", "2", NULL};
    cr_expect_eq(capture(cmd_sweep, 10, a, &out), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "--label-noise"), "%s", er_msg());
    free(out);
}

/* issue 33: sweep rows carry the 95 % bootstrap intervals `eval` prints (uAP, Acc@1 over queries,
 * kNN accuracy over queries), the same replicates and seed; --bootstrap 0 leaves them out (null) */
Test(infer_sweep, rows_have_bootstrap_intervals) {
    char *a1[] = {"sweep", "--synthetic", "--n", "400", "--queries", "80", "--dim", "16", "--clusters", "8",
                  "--bits", "8,16", "--k", "1,6", "--json", "--bootstrap", "200", NULL};
    char *out;
    cr_assert_eq(capture(cmd_sweep, 17, a1, &out), ER_OK, "%s", er_msg());
    int rows = 0, wide = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        json_value v;
        cr_assert_eq(json_parse(line, strlen(line), "sweep", &v), ER_OK, "%s", line);
        const char *m[3][3] = {{"uAP", "uAP_lo", "uAP_hi"}, {"acc1", "acc1_lo", "acc1_hi"},
                               {"knn_accuracy", "knn_accuracy_lo", "knn_accuracy_hi"}};
        for (int j = 0; j < 3; j++) {
            const json_value *x = json_get(&v, m[j][0]), *lo = json_get(&v, m[j][1]), *hi = json_get(&v, m[j][2]);
            cr_assert(x && lo && hi && lo->type == JSON_NUMBER && hi->type == JSON_NUMBER, "%s: no %s interval", line, m[j][0]);
            cr_expect(lo->number <= x->number + 1e-12 && x->number <= hi->number + 1e-12, "%s: %s", line, m[j][0]);
            wide += hi->number - lo->number > 0.01;
        }
        rows++;
        json_free(&v);
    }
    cr_expect_eq(rows, 6);
    cr_expect_gt(wide, 6, "intervals of 80 queries are not points");
    free(out);
    char *a2[] = {"sweep", "--synthetic", "--n", "400", "--queries", "80", "--dim", "16", "--clusters", "8",
                  "--bits", "8", "--k", "6", "--json", "--bootstrap", "0", NULL};
    cr_assert_eq(capture(cmd_sweep, 17, a2, &out), ER_OK, "%s", er_msg());
    cr_expect(strstr(out, "\"uAP_lo\": null") && !strstr(out, "\"bootstrap\": 200"), "%s", out);
    free(out);
    char *a3[] = {"sweep", "--synthetic", "--n", "400", "--queries", "80", "--dim", "16", "--clusters", "8",
                  "--bits", "8", "--k", "6", NULL};
    cr_assert_eq(capture(cmd_sweep, 14, a3, &out), ER_OK, "%s", er_msg());
    cr_expect(strstr(out, "uAP 95%") && strstr(out, "kNN-acc 95%"), "%s", out);
    free(out);
}

/* --bootstrap has the one range every command's --bootstrap has (a 1e7 here ran without end). */
Test(infer_sweep, bootstrap_count_is_range_checked) {
    char *out = NULL;
    char *a[] = {"sweep", "--synthetic", "--n", "100", "--queries", "5", "--dim", "8", "--bootstrap", "10000000", NULL};
    cr_expect_eq(capture(cmd_sweep, 10, a, &out), ER_INPUT, "%s", er_msg());
    cr_expect(strstr(er_msg(), "--bootstrap") && strstr(er_msg(), "100000"), "%s", er_msg());
    free(out);
}
