/* cmd_eval_sequence.c — `endoret eval sequence --emb E`: the sequence protocol on frames grouped
 * by polyp (infer/eval/sequence_protocol.h) and EndoFinder's 2-vs-2 views picked by position; and
 * `eval compare A B --sequence`: the same, paired over sequences. */
#include "cli/cli_util.h"
#include "cli/common_opts.h"
#include "cli/seq_desc.h"
#include "infer/eval/bootstrap.h"
#include "infer/eval/multiview.h"
#include "infer/eval/paired.h"
#include "infer/eval/reid_views.h"
#include "infer/eval/seq_folds.h"
#include "infer/eval/sequence_protocol.h"
#include "nn/base/args.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

#define SETTING_2V2 8             /* multiview.c's row Q1Q2 -> R1R2 */

/* rc with the current message prefixed by the file (er_fail may quote er_msg()) */
static int prefixed(int rc, const char *what) { return er_fail(rc, "%s: %s", what, er_msg()); }

/* the ignore rule in words */
static const char *gap_text(int gap, double frac, char *buf, int size) {
    if (gap > 1 && frac > 0) snprintf(buf, size, "closer than %d positions or %g of the sequence", gap, frac);
    else if (frac > 0) snprintf(buf, size, "closer than %g of the sequence", frac);
    else if (gap > 1) snprintf(buf, size, "closer than %d positions", gap);
    else snprintf(buf, size, "none (only the frame itself)");
    return buf;
}

/* a bootstrap p is resolved to 2/B: 0 means no replicate reached the other side */
static const char *p_text(double p, int B, char *buf, int size) {
    if (p == 0) snprintf(buf, size, "p < %.2g (no replicate of %d crossed 0)", 2.0 / B, B);
    else snprintf(buf, size, "p = %.4g", p);
    return buf;
}

static void views_name(int mask, const char *a, const char *b, char *buf) {
    snprintf(buf, 8, "%s%s", mask & 1 ? a : "", mask & 2 ? b : "");
}

/* the sequence protocol and the 2-vs-2 row(s) of a descriptor, only fold `only`'s queries when >= 0 */
static int score_desc(const seq_desc *d, int only, const seq_gap *g, int k, int no2, seq_result *r, mv_row rows[9],
                      reid_view_result keep[9], int *n4, int *nshort) {
    int rc = seq_eval_files(d->es, d->nf, d->fold, g, r);
    if (!rc && only >= 0) {
        uint8_t *mask = xmalloc((size_t)r->nframes);
        for (int i = 0; i < r->nframes; i++) mask[i] = d->fold[i] == only;
        rc = seq_keep_queries(r, mask);
        free(mask);
        if (rc) seq_result_free(r);
    }
    if (!rc && !no2 && (rc = seq_two_vs_two_files(d->es, d->nf, d->fold, only, k, rows, keep, n4, nshort))) seq_result_free(r);
    return rc;
}

int cmd_eval_sequence(int argc, char **argv) {
    const char *ep = NULL, *folds = NULL;
    int gap = 0, k = REID_DEFAULT_K, B = BOOTSTRAP_DEFAULT_N, json = 0, no2 = 0, only = -1;
    double frac = SEQ_DEFAULT_GAP_FRAC;
    arg_spec specs[] = {
        OPT_EMB(&ep, "embeddings of every frame, scene = sequence, view = frame position (data import --layout sequences --views 0)",
                .required = 1),
        OPT_GAP(&gap),
        OPT_GAP_FRAC(&frac),
        OPT_K(&k),
        OPT_BOOTSTRAP(&B),
        {"no-2v2", ARG_FLAG, &no2, "skip EndoFinder's 2-vs-2 view protocol"},
        {"folds", ARG_STR, &folds, "leave-sequences-out folds (data split --by scene --folds K); --emb may then list K files, "
                                   "file k scoring the queries of fold k (infer/eval/seq_folds.h)"},
        {"fold", ARG_INT, &only, "with --folds: only the queries of this fold (all frames stay in the gallery); --emb one file",
         "[-1, 1000]", .def = "-1 = every fold"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret eval sequence --emb E [--gap N] [--gap-frac F] [--bootstrap N] [--json]\n"
                        "       endoret eval sequence --emb E0,E1,..,E{K-1} --folds FOLDS.csv [...]   (file k: the encoder that held out fold k)", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    seq_desc d;
    if ((rc = seq_desc_load(ep, folds, only, "--emb", 0, &d))) return rc;
    const emb_set *e0 = &d.es[0];
    seq_result r;
    seq_gap g = {gap, frac};
    mv_row rows[9];
    reid_view_result keep[9];
    int n4 = 0, nshort = 0;
    if ((rc = score_desc(&d, only, &g, k, no2, &r, rows, keep, &n4, &nshort))) { rc = prefixed(rc, ep); seq_desc_free(&d); return rc; }
    seq_interval ci;
    seq_bootstrap(&r, B, BOOTSTRAP_SEED, &ci);
    emb_distance dist = DIST_COSINE;
    emb_distance_of(e0, "--emb", &dist);
    if (!rc && json) {
        printf("{\"frames\": %d, \"sequences\": %d, \"queries\": %d, \"skipped\": %d, \"gap\": %d, \"gap_frac\": ", r.nframes, r.nseq,
               r.nqueries, r.nskipped, gap);
        json_put_num(stdout, frac);
        printf(", \"distance\": \"%s\", \"mAP\": ", emb_distance_name(dist)); json_put_num(stdout, r.map);
        json_put_field(stdout, "acc1", r.acc1);
        json_put_field(stdout, "recall_p90", r.recall_p90);
        if (B) {
            json_put_field(stdout, "mAP_lo", ci.map_lo); json_put_field(stdout, "mAP_hi", ci.map_hi);
            json_put_field(stdout, "acc1_lo", ci.acc1_lo); json_put_field(stdout, "acc1_hi", ci.acc1_hi);
            json_put_field(stdout, "recall_p90_lo", ci.rp90_lo);
            json_put_field(stdout, "recall_p90_hi", ci.rp90_hi);
            printf(", \"bootstrap\": %d, \"bootstrap_sequences\": %d", B, r.nqseq);
        }
        if (!no2) {
            printf(", \"sequences_2v2\": %d, \"too_short_2v2\": %d, \"k\": %d, \"views_2v2\": [", n4, nshort, k);
            for (int o = 0; o < 9; o++) {
                char q[8], f[8];
                views_name(rows[o].qmask, "Q1", "Q2", q), views_name(rows[o].rmask, "R1", "R2", f);
                printf("%s{\"query_views\": \"%s\", \"ref_views\": \"%s\", \"uAP\": ", o ? ", " : "", q, f);
                json_put_num(stdout, rows[o].r.uap); json_put_field(stdout, "acc1", rows[o].r.acc1);
                json_put_field(stdout, "recall_p90", rows[o].r.recall_p90);
                if (B) {
                    reid_interval vi;
                    reid_bootstrap(keep[o].pred, keep[o].npred, keep[o].gt, keep[o].ngt, B, BOOTSTRAP_SEED, &vi);
                    json_put_field(stdout, "uAP_lo", vi.lo.uap); json_put_field(stdout, "uAP_hi", vi.hi.uap);
                }
                printf("}");
            }
            printf("]");
        }
        printf("}\n");
    } else if (!rc) {
        char gt[128];
        printf("sequence protocol: %d frames in %d sequences by %s; every frame a query, same-sequence frames ignored: %s; "
               "%d queries, %d skipped (no positive left)\n",
               r.nframes, r.nseq, emb_distance_name(dist), gap_text(gap, frac, gt, sizeof gt), r.nqueries, r.nskipped);
        if (d.nf > 1) printf("  each query and its gallery scored by file k of the %d, k = the query's fold in %s\n", d.nf, folds);
        if (only >= 0) printf("  queries: the frames of fold %d of %s only (every frame stays in the gallery)\n", only, folds);
        printf("  mAP %.4f   Acc@1 %.4f   Recall@P90 %.4f\n", r.map, r.acc1, r.recall_p90);
        if (B)
            printf("  95%% interval (bootstrap over %d sequences, %d replicates): mAP [%.4f, %.4f]   Acc@1 [%.4f, %.4f]   Recall@P90 [%.4f, %.4f]\n",
                   r.nqseq, B, ci.map_lo, ci.map_hi, ci.acc1_lo, ci.acc1_hi, ci.rp90_lo, ci.rp90_hi);
        if (!no2) {
            printf("2-vs-2 view protocol (EndoFinder): 4 frames per sequence at the centres of 4 equal parts = Q1,Q2,R1,R2; "
                   "%d sequences (%d with fewer than 4 frames left out), top-%d\n", n4, nshort, k);
            for (int o = 0; o < 9; o++) {
                char q[8], f[8];
                views_name(rows[o].qmask, "Q1", "Q2", q), views_name(rows[o].rmask, "R1", "R2", f);
                printf("  %-4s -> %-4s  uAP %.4f   Acc@1 %.4f   Recall@P90 %.4f", q, f, rows[o].r.uap, rows[o].r.acc1, rows[o].r.recall_p90);
                if (B) {
                    reid_interval vi;
                    reid_bootstrap(keep[o].pred, keep[o].npred, keep[o].gt, keep[o].ngt, B, BOOTSTRAP_SEED, &vi);
                    printf("   uAP 95%% [%.4f, %.4f] (over sequences)", vi.lo.uap, vi.hi.uap);
                }
                printf("\n");
            }
        }
    }
    if (!no2) for (int o = 0; o < 9; o++) reid_view_result_free(&keep[o]);
    seq_result_free(&r);
    seq_desc_free(&d);
    return rc;
}

static int eval_file(const char *path, const char *folds, int only, const seq_gap *g, int k, seq_result *r, reid_view_result *two) {
    seq_desc d;
    int rc = seq_desc_load(path, folds, only, "eval compare", 0, &d);
    if (rc) return rc;
    mv_row rows[9];
    reid_view_result keep[9];
    int n4, nshort;
    if (!(rc = score_desc(&d, only, g, k, 0, r, rows, keep, &n4, &nshort))) {
        *two = keep[SETTING_2V2];
        for (int o = 0; o < 9; o++) if (o != SETTING_2V2) reid_view_result_free(&keep[o]);
    }
    if (rc) rc = prefixed(rc, path);
    seq_desc_free(&d);
    return rc;
}

int eval_compare_sequence(char **files, int nfiles, int gap, double frac, int k, int B, int json, const char *folds, int only) {
    int rc = ER_OK;
    seq_gap g = {gap, frac};
    seq_result *r = xcalloc((size_t)nfiles, sizeof *r);
    reid_view_result *two = xcalloc((size_t)nfiles, sizeof *two);
    for (int i = 0; i < nfiles && !rc; i++) rc = eval_file(files[i], folds, only, &g, k, &r[i], &two[i]);
    if (!rc && !json) {
        char gt[128];
        printf("paired comparison, sequence protocol (same-sequence frames ignored: %s): %d queries in %d sequences; "
               "paired bootstrap over sequences (%d replicates); 2-vs-2 (Q1Q2 -> R1R2, top-%d): paired bootstrap over sequences\n",
               gap_text(gap, frac, gt, sizeof gt), r[0].nqueries, r[0].nqseq, B, k);
    }
    for (int i = 1; i < nfiles && !rc; i++) {
        seq_paired t;
        reid_paired v;
        rc = seq_paired_test(&r[0], &r[i], B, BOOTSTRAP_SEED, &t);
        if (!rc) rc = reid_paired_test(two[0].pred, two[0].npred, two[i].pred, two[i].npred, two[0].gt, two[0].ngt, two[i].gt, two[i].ngt,
                                       B, BOOTSTRAP_SEED, &v);
        if (rc) {
            char both[2048];
            snprintf(both, sizeof both, "%s vs %s", files[0], files[i]);
            rc = prefixed(rc, both);
            break;
        }
        if (json) {
            printf("{\"a\": \"%s\", \"b\": \"%s\", \"queries\": %d, \"sequences\": %d, \"mAP_a\": ", files[0], files[i], t.nqueries, t.nqseq);
            json_put_num(stdout, t.map_a); json_put_field(stdout, "mAP_b", t.map_b);
            json_put_field(stdout, "mAP_diff_lo", t.map_d_lo); json_put_field(stdout, "mAP_diff_hi", t.map_d_hi);
            json_put_field(stdout, "mAP_p", t.map_p);
            json_put_field(stdout, "acc1_a", t.acc1_a); json_put_field(stdout, "acc1_b", t.acc1_b);
            json_put_field(stdout, "acc1_diff_lo", t.acc1_d_lo); json_put_field(stdout, "acc1_diff_hi", t.acc1_d_hi);
            json_put_field(stdout, "acc1_p", t.acc1_p);
            json_put_field(stdout, "uAP_2v2_a", v.uap_a); json_put_field(stdout, "uAP_2v2_b", v.uap_b);
            json_put_field(stdout, "uAP_2v2_diff_lo", v.delta_lo); json_put_field(stdout, "uAP_2v2_diff_hi", v.delta_hi);
            json_put_field(stdout, "uAP_2v2_p", v.p_uap);
            printf("}\n");
        } else {
            printf("A %s\nB %s\n", files[0], files[i]);
            char p1[64], p2[64], p3[64];
            printf("  mAP    A %.4f  B %.4f  A-B %+.4f, 95%% interval [%+.4f, %+.4f], %s\n", t.map_a, t.map_b, t.map_a - t.map_b,
                   t.map_d_lo, t.map_d_hi, p_text(t.map_p, B, p1, sizeof p1));
            printf("  Acc@1  A %.4f  B %.4f  A-B %+.4f, 95%% interval [%+.4f, %+.4f], %s\n", t.acc1_a, t.acc1_b,
                   t.acc1_a - t.acc1_b, t.acc1_d_lo, t.acc1_d_hi, p_text(t.acc1_p, B, p2, sizeof p2));
            printf("  2-vs-2 uAP  A %.4f  B %.4f  A-B %+.4f, 95%% interval [%+.4f, %+.4f], %s (%d sequences)\n", v.uap_a, v.uap_b,
                   v.uap_a - v.uap_b, v.delta_lo, v.delta_hi, p_text(v.p_uap, B, p3, sizeof p3), v.nq);
        }
    }
    for (int i = 0; i < nfiles; i++) seq_result_free(&r[i]), reid_view_result_free(&two[i]);
    free(r), free(two);
    return rc;
}
