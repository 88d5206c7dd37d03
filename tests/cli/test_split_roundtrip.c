/* test_split_roundtrip.c — `embed --split` files with the full manifest through `index build`,
 * `classify` and `report` (issue 33): every case and query keeps the image, label and row of the
 * manifest row it embedded; and the vote's default k is one number in classify, report and serve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets/manifest.h"
#include "datasets/synth.h"
#include "infer/report/report.h"
#include "infer/retrieval/casedb.h"
#include "infer/retrieval/embeddings.h"
#include "infer/retrieval/knn.h"
#include "nn/base/base.h"
#include "nn/base/json.h"
#include "tests/test_capture.h"

int cmd_embed(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_report(int argc, char **argv);

static int run_quiet(int (*fn)(int, char **), int argc, char **argv, char **out) {
    return test_capture_stdout(fn, argc, argv, out);
}

static int count_rows(const manifest *m, const char *split) {
    int n = 0;
    for (int i = 0; i < m->n; i++) n += m->rows[i].split && !strcmp(m->rows[i].split, split);
    return n;
}

Test(cli_split, embed_split_files_round_trip_through_index_classify_report) {
    const char *dir = test_tmpdir();
    synth_config sc = {.scenes = 20, .views = 2, .size = 16, .seed = 5, .threads = 1};
    cr_assert_eq(synth_write_dataset(dir, &sc), 0, "%s", er_msg());
    char *man = path_join(dir, "manifest.csv"), *dbe = path_join(dir, "db.safetensors"), *qe = path_join(dir, "q.safetensors");
    char *cases = path_join(dir, "cases.db"), *html = path_join(dir, "report.html"), *out = NULL;
    manifest m;
    cr_assert_eq(manifest_load(man, &m), 0, "%s", er_msg());
    int ntrain = count_rows(&m, "train"), ntest = count_rows(&m, "test");
    cr_assert(ntrain > 6 && ntest > 0 && ntrain + ntest < m.n, "train %d test %d of %d", ntrain, ntest, m.n);
    char *e1[] = {"embed", "--baseline", "thumbnail", "--manifest", man, "--split", "train", "--out", dbe, NULL};
    char *e2[] = {"embed", "--baseline", "thumbnail", "--manifest", man, "--split", "test", "--out", qe, NULL};
    cr_assert_eq(run_quiet(cmd_embed, 9, e1, &out), ER_OK, "%s", er_msg());
    free(out);
    cr_assert_eq(run_quiet(cmd_embed, 9, e2, &out), ER_OK, "%s", er_msg());
    free(out);
    /* the case database: each case is the manifest row its id names */
    char *b[] = {"index", "build", "--emb", dbe, "--manifest", man, "--out", cases, NULL};
    cr_assert_eq(run_quiet(cmd_index, 8, b, &out), ER_OK, "%s", er_msg());
    free(out);
    casedb db;
    cr_assert_eq(casedb_open(cases, &db), 0, "%s", er_msg());
    cr_assert_eq(db.n, ntrain);
    for (int64_t r = 0; r < db.n; r++) {
        int row = (int)db.ids[r];
        cr_assert(row >= 0 && row < m.n);
        cr_expect_str_eq(m.rows[row].split, "train", "case %d", row);
        char *want = manifest_image_path(&m, row);
        cr_expect_str_eq(db.paths[r], want, "case %d", row);
        cr_expect_str_eq(db.label_names[db.labels[r]], m.rows[row].label, "case %d", row);
        free(want);
    }
    /* classify: every query is scored against the label of the row it embedded; the default k */
    char *c[] = {"classify", "--index", cases, "--query", qe, "--json", NULL};
    cr_assert_eq(run_quiet(cmd_classify, 6, c, &out), ER_OK, "%s", er_msg());
    int lines = 0, nb = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        json_value jv, *v = &jv;
        cr_assert_eq(json_parse(line, strlen(line), "classify", v), ER_OK, "%s", line);
        if (json_get(v, "summary")) cr_expect_eq((int)json_get(v, "n")->number, ntest, "%s", line);
        else {
            lines++;
            int row = (int)json_get(v, "query")->number;
            cr_expect_str_eq(m.rows[row].split, "test", "query %d", row);
            const json_value *ids = json_get(v, "neighbours");
            nb = ids->n;
            for (int j = 0; j < ids->n; j++) cr_expect_str_eq(m.rows[(int)ids->items[j].number].split, "train");
        }
        json_free(v);
    }
    free(out);
    cr_expect_eq(lines, ntest);
    cr_expect_eq(nb, knn_default_k(0), "classify's default k");
    /* report: query images are the rows the query file names, and the same default k */
    report_opts o = REPORT_OPTS_INIT;
    o.index = cases;
    o.query = qe;
    o.manifest = man;
    cr_assert_eq(report_opts_check(&o), ER_OK, "%s", er_msg());
    emb_set q;
    cr_assert_eq(emb_load(qe, &q), 0, "%s", er_msg());
    report_data r;
    cr_assert_eq(report_build(&db, cases, &q, qe, man, &o.cfg, &r), ER_OK, "%s", er_msg());
    cr_expect_eq(r.k, knn_default_k(0), "report's default k");
    cr_expect_eq(r.scored, ntest);
    for (int i = 0; i < r.nq; i++) {
        char *want = manifest_image_path(&m, (int)r.q[i].id);
        cr_expect_str_eq(r.q[i].image, want, "query %lld", (long long)r.q[i].id);
        cr_expect_str_eq(r.q[i].truth_name, m.rows[r.q[i].id].label);
        for (int j = 0; j < r.q[i].nnb; j++) {
            char *nbp = manifest_image_path(&m, (int)r.q[i].nb[j].id);
            cr_expect_str_eq(r.q[i].nb[j].image, nbp);
            free(nbp);
        }
        free(want);
    }
    report_free(&r);
    emb_free(&q);
    casedb_close(&db);
    char *rep[] = {"report", "--index", cases, "--query", qe, "--manifest", man, "--out", html, "--json", NULL};
    cr_assert_eq(run_quiet(cmd_report, 10, rep, &out), ER_OK, "%s", er_msg());
    json_value jv, *v = &jv;
    cr_assert_eq(json_parse(out, strlen(out), "report", v), ER_OK, "%s", out);
    cr_expect_eq((int)json_get(v, "queries")->number, ntest);
    cr_expect_eq((int)json_get(v, "k")->number, knn_default_k(0));
    json_free(v);
    free(out);
    manifest_free(&m);
    free(man), free(dbe), free(qe), free(cases), free(html);
}
