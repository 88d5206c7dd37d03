/* cmd_eval_compare.c — `endoret eval compare A.safetensors B.safetensors [C ...] --ref-view V`:
 * every file is evaluated on the same queries (the same view settings as `eval reid --emb`), then
 * each later file is compared with the first by a paired test (infer/eval/paired.h): paired
 * bootstrap for the uAP difference, exact McNemar for Acc@1. With --folds a file may be a list of one
 * file per leave-sequences-out fold (each fold's queries scored in its own file, pooled). */
#include "cli/cli_util.h"
#include "infer/eval/bootstrap.h"
#include "infer/eval/paired.h"
#include "infer/eval/reid_views.h"
#include "infer/eval/sequence_protocol.h"
#include "cli/common_opts.h"
#include "cli/seq_desc.h"
#include "infer/eval/seq_folds.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

/* one descriptor (a file, or with --folds a list of one file per fold, fold k's queries scored in file
 * k: infer/eval/seq_folds.h) on the view setting */
static int evaluate_file(const char *path, const char *folds, const char *ref_s, const char *query_s, int k, reid_view_result *res) {
    seq_desc d;
    int rc = seq_desc_load(path, folds, -1, "eval compare", 1, &d);
    if (rc) return rc;
    int64_t *rv = NULL, *qv = NULL;
    reid_views_cfg c = {.k = k};
    if (!(rc = emb_view_list(&d.es[0], ref_s, "--ref-view", &rv, &c.nrviews)) &&
        !(rc = emb_view_list(&d.es[0], query_s, "--query-view", &qv, &c.nqviews))) {
        c.rviews = rv;
        c.qviews = qv;
        rc = reid_views_files(d.es, d.nf, d.fold, &c, res);
        if (rc) rc = er_fail(rc, "%s: %s", path, er_msg());
    }
    free(rv);
    free(qv);
    seq_desc_free(&d);
    return rc;
}

int eval_compare_sequence(char **files, int nfiles, int gap, double frac, int k, int B, int json, const char *folds, int only); /* cmd_eval_sequence.c */

int cmd_eval_compare(int argc, char **argv) {
    const char *ref_s = NULL, *query_s = NULL, *folds = NULL;
    int k = REID_DEFAULT_K, B = BOOTSTRAP_DEFAULT_N, json = 0, seq = 0, gap = 0, only = -1;
    double gap_frac = SEQ_DEFAULT_GAP_FRAC;
    arg_spec specs[] = {
        {"ref-view", ARG_STR, &ref_s, "reference view(s) of every file, e.g. 2 or 2,3 (required without --sequence)"},
        {"query-view", ARG_STR, &query_s, "query view(s)", .def = "every view that is not a reference"},
        OPT_K(&k),
        OPT_BOOTSTRAP(&B),
        OPT_JSON(&json),
        {"sequence", ARG_FLAG, &seq, "the sequence protocol (eval sequence) instead of views: paired over sequences"},
        OPT_GAP(&gap),
        OPT_GAP_FRAC(&gap_frac),
        {"folds", ARG_STR, &folds, "leave-sequences-out folds: a file may be a list E0,..,E{K-1}, file k scoring the queries of "
                                   "fold k (views: a row's fold is its scene's)"},
        {"fold", ARG_INT, &only, "with --folds --sequence: only the queries of this fold; each descriptor one file", "[-1, 1000]",
         .def = "-1 = every fold"},
    };
    char **files = NULL;
    int nfiles = 0;
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret eval compare A.safetensors B.safetensors [C ...] --ref-view V[,V] [--query-view V[,V]] | --sequence [--gap N] [--gap-frac F] [--folds FOLDS.csv] [--json]", &files, &nfiles);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    if (nfiles < 2) rc = er_fail(ER_INPUT, "eval compare: give at least two embedding files (the first is compared with each other)");
    else if (B < 1) rc = er_fail(ER_INPUT, "--bootstrap must be >= 1 for a paired test");
    else if (seq && (ref_s || query_s)) rc = er_fail(ER_INPUT, "eval compare: --sequence takes no --ref-view / --query-view");
    else if (only >= 0 && !seq) rc = er_fail(ER_INPUT, "eval compare: --fold needs --sequence");
    else if (seq) { rc = eval_compare_sequence(files, nfiles, gap, gap_frac, k, B, json, folds, only); free(files); return rc; }
    else if (!ref_s) rc = er_fail(ER_INPUT, "eval compare: --ref-view is required (or --sequence)");
    reid_view_result *res = xcalloc((size_t)(nfiles > 0 ? nfiles : 1), sizeof *res);
    for (int i = 0; i < nfiles && !rc; i++) rc = evaluate_file(files[i], folds, ref_s, query_s, k, &res[i]);
    if (!rc && !json)
        printf("paired comparison on the same %d queries, top-%d; uAP: paired bootstrap (%d replicates), Acc@1: exact McNemar\n",
               res[0].nqueries, res[0].k, B);
    for (int i = 1; i < nfiles && !rc; i++) {
        reid_paired t;
        rc = reid_paired_test(res[0].pred, res[0].npred, res[i].pred, res[i].npred, res[0].gt, res[0].ngt, res[i].gt, res[i].ngt,
                              B, BOOTSTRAP_SEED, &t);
        if (rc) { rc = er_fail(rc, "%s vs %s: %s", files[0], files[i], er_msg()); break; }
        if (json) {
            printf("{\"a\": \"%s\", \"b\": \"%s\", \"queries\": %d, \"uAP_a\": ", files[0], files[i], t.nq);
            json_put_num(stdout, t.uap_a); json_put_field(stdout, "uAP_b", t.uap_b);
            json_put_field(stdout, "uAP_diff_lo", t.delta_lo);
            json_put_field(stdout, "uAP_diff_hi", t.delta_hi);
            json_put_field(stdout, "uAP_p", t.p_uap);
            json_put_field(stdout, "acc1_a", t.acc1_a); json_put_field(stdout, "acc1_b", t.acc1_b);
            printf(", \"a_only\": %d, \"b_only\": %d, \"acc1_p\": ", t.a_only, t.b_only);
            json_put_num(stdout, t.p_mcnemar);
            printf("}\n");
        } else {
            printf("A %s\nB %s\n", files[0], files[i]);
            char p[64]; /* a bootstrap p is resolved to 2/B: 0 means no replicate reached the other side */
            if (t.p_uap == 0) snprintf(p, sizeof p, "p < %.2g (no replicate of %d crossed 0)", 2.0 / t.replicates, t.replicates);
            else snprintf(p, sizeof p, "p = %.4g", t.p_uap);
            printf("  uAP    A %.4f  B %.4f  A-B %+.4f, 95%% interval [%+.4f, %+.4f], %s\n", t.uap_a, t.uap_b, t.uap_a - t.uap_b,
                   t.delta_lo, t.delta_hi, p);
            printf("  Acc@1  A %.4f  B %.4f  right only by A %d, only by B %d, p = %.4g\n", t.acc1_a, t.acc1_b, t.a_only, t.b_only, t.p_mcnemar);
        }
    }
    for (int i = 0; i < nfiles; i++) reid_view_result_free(&res[i]);
    free(res);
    free(files);
    return rc;
}
