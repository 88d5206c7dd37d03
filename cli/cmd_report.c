/* cmd_report.c — `endoret report`: one self-contained HTML page explaining the kNN diagnosis of
 * each query by its nearest past cases (report.h, report_html.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/casedb.h"
#include "cli/cli_util.h"
#include "infer/report/region_evidence.h"
#include "infer/report/report.h"
#include "infer/report/report_html.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/progress.h"

int cmd_report(int argc, char **argv) {
    report_opts o = REPORT_OPTS_INIT;
    const char *out = NULL, *model_path = NULL;
    int thumb = 112, json = 0;
    arg_spec specs[] = {
        OPT_REPORT(o),
        {"thumb", ARG_INT, &thumb, "thumbnail side in pixels", "[16, 1024]"},
        OPT_OUT(&out, "HTML file to write", .required = 1),
        OPT_JSON(&json),
        {"model", ARG_STR, &model_path, "the encoder that embedded the cases: draws over each thumbnail the regions that "
                                        "resemble the other image (region evidence)"},
    };
    int rc = args_parse(argc, argv, specs, OPT_REPORT_N + 4,
                        "endoret report --index DB [--query Q.safetensors] [--manifest QM] [--k 6] [--vote majority|weighted] "
                        "[--limit N] [--model M] --out report.html", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    progress_quiet(json);
    if ((rc = report_opts_check(&o))) return rc;
    const char *index = o.index, *query = o.query, *man = o.manifest, *vote = o.vote;
    model *m = NULL; /* region evidence: the encoder's spatial features (region_evidence.h) */
    if (model_path) {
        if ((rc = model_load(model_path, NULL, NULL, 0, &m)) || (rc = model_prepack(m))) { model_free(m); return rc; }
        if (!region_supported(m)) {
            rc = er_fail(ER_INPUT, "--model %s: a %s model has no spatial features for region evidence (ViT, scene model or ResNet)",
                         model_path, m->arch->name);
            model_free(m);
            return rc;
        }
    }
    casedb db;
    if ((rc = casedb_open(index, &db))) { model_free(m); return rc; }
    if (m && m->dim != db.dim) rc = er_fail(ER_INPUT, "--model %s gives %d-d descriptors but %s holds %d-d ones", model_path, m->dim, index, db.dim);
    region_engine ev = {0};
    if (m && !rc && (rc = region_engine_init(&ev, m, db.paths, db.n))) {
        rc = er_fail(ER_INPUT, "--model %s: %s (%s)", model_path, er_msg(), index); /* er_fail may quote er_msg() */
    }
    if (rc) {
        model_free(m);
        casedb_close(&db);
        return rc;
    }
    emb_set q;
    int have_q = 0;
    if (query) {
        if ((rc = emb_load_arg(query, "--query", &q))) { casedb_close(&db); region_engine_free(&ev); model_free(m); return rc; }
        have_q = 1;
    }
    report_data r;
    double t0 = now_seconds();
    rc = report_build(&db, index, have_q ? &q : NULL, query, man, &o.cfg, &r);
    if (have_q) emb_free(&q);
    casedb_close(&db);
    if (rc) { region_engine_free(&ev); model_free(m); return rc; }
    html_buf b = {0};
    double ev_ms = 0;
    report_html_page(&b, &r, thumb, m ? &ev : NULL, &ev_ms);
    region_engine_free(&ev);
    model_free(m);
    rc = write_file_atomic(out, b.s, b.len);
    double t1 = now_seconds();
    if (!rc) {
        if (json) {
            printf("{\"out\": ");
            json_put_str(stdout, out);
            printf(", \"queries\": %d, \"scored\": %d, \"correct\": %d, \"accuracy\": ", r.nq, r.scored, r.correct);
            json_put_num(stdout, r.accuracy);
            printf(", \"k\": %d, \"bytes\": %zu, \"evidence_ms\": %.1f}\n", r.k, b.len, ev_ms);
        } else {
            printf("wrote %s (%d queries, %.1f kB) in %.2f s\n", out, r.nq, b.len / 1024.0, t1 - t0);
            if (model_path) printf("region evidence: %.0f ms for %d queries (%.0f ms per query card, k = %d)\n", ev_ms, r.nq,
                                   r.nq ? ev_ms / r.nq : 0.0, r.k);
            if (r.scored) printf("vote accuracy %.4f (%d of %d queries with a known diagnosis; %s vote, k = %d)\n", r.accuracy, r.correct,
                                 r.scored, vote, r.k);
        }
    }
    hb_free(&b);
    report_free(&r);
    return rc;
}
