/* cmd_report.c — `endoret report`: one self-contained HTML page explaining the kNN diagnosis of
 * each query by its nearest past cases (report.h, report_html.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/casedb.h"
#include "infer/cli_util.h"
#include "infer/report.h"
#include "infer/report_html.h"
#include "nn/args.h"
#include "nn/base.h"

int cmd_report(int argc, char **argv) {
    const char *index = NULL, *query = NULL, *man = NULL, *out = NULL, *vote = "majority";
    int k = 10, limit = 0, use_float = 0, thumb = 112, json = 0;
    double tau = 0.1;
    arg_spec specs[] = {
        {"index", ARG_STR, &index, "case database (endoret index build)"},
        {"query", ARG_STR, &query, "embedding file of the queries (none: the database's cases, leave-one-out)"},
        {"manifest", ARG_STR, &man, "manifest of the query images (none: the one named in the query file)"},
        {"k", ARG_INT, &k, "neighbours shown and voting"},
        {"vote", ARG_STR, &vote, "majority (ties -> nearest) | weighted (exp(sim/tau))"},
        {"tau", ARG_DOUBLE, &tau, "temperature of the weighted vote"},
        {"float", ARG_FLAG, &use_float, "neighbours by float cosine instead of Hamming"},
        {"limit", ARG_INT, &limit, "at most this many queries (0 = all)"},
        {"thumb", ARG_INT, &thumb, "thumbnail side in pixels"},
        {"out", ARG_STR, &out, "HTML file to write"},
        {"json", ARG_FLAG, &json, "machine-readable summary"},
    };
    int rc = args_parse(argc, argv, specs, 11,
                        "endoret report --index DB [--query Q.safetensors] [--manifest QM] [--k 10] [--vote majority|weighted] "
                        "[--limit N] --out report.html", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int weighted = !strcmp(vote, "weighted");
    if (!weighted && strcmp(vote, "majority")) return er_fail(ER_INPUT, "--vote: '%s' (majority or weighted)", vote);
    if (!index) return er_fail(ER_INPUT, "--index is required");
    if (!out) return er_fail(ER_INPUT, "--out is required (the HTML file to write)");
    if (k < 1) return er_fail(ER_INPUT, "--k must be >= 1");
    if (limit < 0) return er_fail(ER_INPUT, "--limit must be >= 0");
    if (thumb < 16 || thumb > 1024) return er_fail(ER_INPUT, "--thumb must be in 16..1024");
    if (man && !query) return er_fail(ER_INPUT, "--manifest describes the query images: give --query too");
    casedb db;
    if ((rc = casedb_open(index, &db))) return rc;
    emb_set q;
    int have_q = 0;
    if (query) {
        if ((rc = load_emb(query, "--query", &q))) { casedb_close(&db); return rc; }
        have_q = 1;
    }
    report_cfg cfg = {k, weighted, tau, use_float, limit};
    report_data r;
    double t0 = now_seconds();
    rc = report_build(&db, index, have_q ? &q : NULL, query, man, &cfg, &r);
    if (have_q) emb_free(&q);
    casedb_close(&db);
    if (rc) return rc;
    html_buf b = {0};
    report_html_page(&b, &r, thumb);
    rc = write_file_atomic(out, b.s, b.len);
    double t1 = now_seconds();
    if (!rc) {
        if (json) {
            printf("{\"out\": ");
            json_put_str(stdout, out);
            printf(", \"queries\": %d, \"scored\": %d, \"correct\": %d, \"accuracy\": ", r.nq, r.scored, r.correct);
            json_put_num(stdout, r.accuracy);
            printf(", \"k\": %d, \"bytes\": %zu}\n", r.k, b.len);
        } else {
            printf("wrote %s (%d queries, %.1f kB) in %.2f s\n", out, r.nq, b.len / 1024.0, t1 - t0);
            if (r.scored) printf("vote accuracy %.4f (%d of %d queries with a known diagnosis; %s vote, k = %d)\n", r.accuracy, r.correct,
                                 r.scored, vote, r.k);
        }
    }
    hb_free(&b);
    report_free(&r);
    return rc;
}
