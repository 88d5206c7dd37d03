/* `endoret eval split` and `endoret eval align`: PGCon's evaluations of frozen descriptors
 * (infer/eval/split_eval.h). split: a labelled training file is the kNN bank / the probe's training
 * set, a test file the queries (labels matched by name), optionally with a seeded share of the
 * training labels (the few-label regimes); align: alignment over pairs of one group and uniformity
 * (Wang & Isola). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "infer/eval/bootstrap.h"
#include "infer/eval/metrics.h"
#include "infer/eval/paired.h"
#include "infer/eval/probe_cv.h"
#include "infer/eval/split_eval.h"
#include "infer/retrieval/distance.h"
#include "infer/retrieval/embeddings.h"
#include "cli/common_opts.h"
#include "nn/base/base.h"
#include "nn/base/json.h"

/* Labels of e as indices into the names of `ref` (by name); -1 for none. ER_INPUT for a test label the
 * training file does not have. */
static int labels_by_name(const emb_set *e, const emb_set *ref, const char *what, int *out) {
    for (int i = 0; i < e->n; i++) {
        out[i] = -1;
        if (!e->labels || e->labels[i] < 0) continue;
        const char *name = e->label_names && e->labels[i] < e->nlabel_names ? e->label_names[e->labels[i]] : NULL;
        if (!name) return er_fail(ER_INPUT, "%s: row %d has label id %lld without a name", what, i, (long long)e->labels[i]);
        for (int c = 0; c < ref->nlabel_names; c++)
            if (!strcmp(ref->label_names[c], name)) out[i] = c;
        if (out[i] < 0) return er_fail(ER_INPUT, "%s: label '%s' is not among the training file's labels", what, name);
    }
    return ER_OK;
}

typedef struct {
    int probe, k, weighted, seed;
    double tau, l2, percent;
} split_opts;

/* Classifies te with tr (its seeded label share), writes right[0..m) (1 = correct) over te's labelled
 * rows and, when conf is given, the C x C confusion counts; *kept = labelled training rows. */
static int split_right(const emb_set *tr, const emb_set *te, const char *trp, const char *tep, const split_opts *o,
                       double *right, int *m, int64_t *conf, int *kept) {
    int *ytr = xmalloc((size_t)(tr->n ? tr->n : 1) * sizeof(int)), *yte = xmalloc((size_t)(te->n ? te->n : 1) * sizeof(int));
    int *pred = xmalloc((size_t)(te->n ? te->n : 1) * sizeof(int)), C = tr->nlabel_names, rc;
    uint8_t *keep = xmalloc((size_t)(tr->n ? tr->n : 1));
    *m = 0;
    if ((rc = emb_require_cosine(tr, trp)) || (rc = emb_require_cosine(te, tep))) goto out;
    if (tr->dim != te->dim) { rc = er_fail(ER_INPUT, "%s is %d-d, %s %d-d", trp, tr->dim, tep, te->dim); goto out; }
    if (!tr->labels || !te->labels) { rc = er_fail(ER_INPUT, "%s has no labels", !tr->labels ? trp : tep); goto out; }
    for (int i = 0; i < tr->n; i++) ytr[i] = (int)tr->labels[i];
    if ((rc = labels_by_name(te, tr, tep, yte))) goto out;
    if (C < 2) { rc = er_fail(ER_INPUT, "%s: classification needs at least 2 labels", trp); goto out; }
    *kept = label_subset(ytr, tr->n, o->percent, (uint64_t)o->seed, keep);
    for (int i = 0; i < tr->n; i++) if (!keep[i]) ytr[i] = -1; /* unlabelled: no vote, not trained on */
    rc = o->probe ? probe_split(tr->x, ytr, tr->n, te->x, te->n, tr->dim, C, o->l2, pred, NULL)
                  : knn_split(tr->x, ytr, tr->n, te->x, te->n, tr->dim, C, o->k, o->weighted, o->tau, pred);
    if (rc) goto out;
    for (int i = 0; i < te->n; i++) {
        if (yte[i] < 0) continue;
        right[(*m)++] = pred[i] == yte[i];
        if (conf && pred[i] >= 0) conf[(size_t)yte[i] * C + pred[i]]++;
    }
    if (!*m) rc = er_fail(ER_INPUT, "%s: no labelled rows", tep);
out:
    free(ytr); free(yte); free(pred); free(keep);
    return rc;
}

static int eval_split(int argc, char **argv) {
    const char *trp = NULL, *tep = NULL, *btrp = NULL, *btep = NULL, *classifier = "knn", *vote = "weighted";
    int k = 290, json = 0, seed = 0, B = BOOTSTRAP_DEFAULT_N;
    double tau = 0.1, l2 = 1e-3, percent = 100;
    arg_spec specs[] = {
        {"train", ARG_STR, &trp, "labelled embeddings: the kNN bank / the probe's training rows"},
        {"test", ARG_STR, &tep, "labelled embeddings of the test rows (labels matched by name)"},
        {"base-train", ARG_STR, &btrp, "a baseline's embeddings of the same training rows (with --base-test: paired comparison)"},
        {"base-test", ARG_STR, &btep, "the baseline's embeddings of the same test rows"},
        {"classifier", ARG_STR, &classifier, "knn (weighted vote, PGCon's zero-shot) or probe (softmax regression)", "knn|probe"},
        OPT_K(&k),
        OPT_VOTE(&vote),
        OPT_TAU(&tau),
        {"l2", ARG_DOUBLE, &l2, "probe: L2 weight", "[0, inf)"},
        {"label-percent", ARG_DOUBLE, &percent, "use this share of each class's training labels (1, 10, 100 in the paper)", "(0, 100]"},
        OPT_SEED(&seed),
        OPT_BOOTSTRAP(&B),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret eval split --train TR --test TE [options]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    split_opts o = {!strcmp(classifier, "probe"), k, !strcmp(vote, "weighted"), seed, tau, l2, percent};
    if (!btrp != !btep) return er_fail(ER_INPUT, "--base-train and --base-test go together (a paired comparison needs both)");
    emb_set tr, te, btr = {0}, bte = {0};
    int paired = btrp != NULL;
    if ((rc = emb_load_arg(trp, "--train", &tr))) return rc;
    if ((rc = emb_load_arg(tep, "--test", &te))) { emb_free(&tr); return rc; }
    if (paired && (rc = emb_load_arg(btrp, "--base-train", &btr))) { emb_free(&tr); emb_free(&te); return rc; }
    if (paired && (rc = emb_load_arg(btep, "--base-test", &bte))) { emb_free(&tr); emb_free(&te); emb_free(&btr); return rc; }
    int C = tr.nlabel_names, kept = 0, m = 0, bkept = 0, bm = 0;
    double *right = xmalloc(sizeof(double) * (te.n ? te.n : 1)), *bright = xmalloc(sizeof(double) * (te.n ? te.n : 1));
    int64_t *conf = xcalloc((size_t)(C > 0 ? C : 1) * (C > 0 ? C : 1), sizeof(int64_t));
    double lo = NAN, hi = NAN, acc = 0, bacc = 0, dlo = NAN, dhi = NAN, p = NAN;
    int a_only = 0, b_only = 0;
    if ((rc = split_right(&tr, &te, "--train", "--test", &o, right, &m, conf, &kept))) goto out;
    if (paired && ((rc = emb_same_rows(&tr, &btr, trp, btrp)) || (rc = emb_same_rows(&te, &bte, tep, btep)) ||
                   (rc = split_right(&btr, &bte, "--base-train", "--base-test", &o, bright, &bm, NULL, &bkept))))
        goto out;
    for (int i = 0; i < m; i++) acc += right[i];
    acc /= m;
    if (B) bootstrap_mean_interval(right, m, B, BOOTSTRAP_SEED, &lo, &hi);
    if (paired) { /* per test row: this encoder's hit minus the baseline's, resampled together */
        for (int i = 0; i < m; i++) {
            bacc += bright[i];
            a_only += right[i] > bright[i], b_only += bright[i] > right[i];
            bright[i] = right[i] - bright[i];
        }
        bacc /= m;
        if (B) bootstrap_mean_interval(bright, m, B, BOOTSTRAP_SEED, &dlo, &dhi);
        p = mcnemar_exact_p(a_only, b_only);
    }
    if (json) {
        printf("{\"classifier\": \"%s\", \"train\": %d, \"train_labelled\": %d, \"label_percent\": %g, \"test\": %d, ", classifier,
               tr.n, kept, percent, m);
        if (!o.probe) printf("\"k\": %d, \"vote\": \"%s\", \"tau\": %g, ", k, vote, tau);
        printf("\"accuracy\": ");
        json_put_num(stdout, acc);
        if (B) { json_put_field(stdout, "accuracy_lo", lo); json_put_field(stdout, "accuracy_hi", hi); }
        if (paired) {
            json_put_field(stdout, "base_accuracy", bacc);
            json_put_field(stdout, "delta", acc - bacc);
            if (B) { json_put_field(stdout, "delta_lo", dlo); json_put_field(stdout, "delta_hi", dhi); }
            printf(", \"only_this\": %d, \"only_base\": %d, \"p_mcnemar\": ", a_only, b_only);
            json_put_num(stdout, p);
        }
        printf(", \"sensitivity\": {");
        for (int c = 0; c < C; c++) {
            printf("%s", c ? ", " : "");
            json_put_str(stdout, tr.label_names[c]);
            printf(": ");
            json_put_num(stdout, sensitivity_from_confusion(conf, C, c));
        }
        printf("}}\n");
    } else {
        if (o.probe) printf("linear probe (softmax regression, L2 %g, standardised)", l2);
        else printf("kNN, %s vote, k = %d", vote, k);
        if (!o.probe && o.weighted) printf(", tau %g", tau);
        printf(": trained on %d of %d rows (%g%% of the labels, seed %d), tested on %d\n", kept, tr.n, percent, seed, m);
        printf("  accuracy %.4f", acc);
        if (B) printf("   95%% interval (bootstrap over test rows, %d replicates) [%.4f, %.4f]", B, lo, hi);
        printf("\n  sensitivity per class:");
        for (int c = 0; c < C; c++) printf("  %s %.4f", tr.label_names[c], sensitivity_from_confusion(conf, C, c));
        printf("\n");
        if (paired) {
            printf("  baseline accuracy %.4f, difference %+.4f", bacc, acc - bacc);
            if (B) printf("   95%% paired interval [%+.4f, %+.4f]", dlo, dhi);
            printf("   (%d rows right only here, %d only in the baseline; McNemar p %.4g)\n", a_only, b_only, p);
        }
    }
out:
    free(right); free(bright); free(conf);
    emb_free(&tr); emb_free(&te);
    if (paired) { emb_free(&btr); emb_free(&bte); }
    return rc;
}

static int eval_align(int argc, char **argv) {
    const char *ep = NULL, *group = "label";
    int json = 0;
    arg_spec specs[] = {
        OPT_EMB(&ep, "embeddings", .required = 1),
        {"group", ARG_STR, &group, "pairs of one class (label: the paper's) or views of one scene (scene)", "label|scene"},
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs, "endoret eval align --emb E [--group label|scene]", NULL, NULL);
    if (rc == ARGS_HELP) return 0;
    if (rc) return rc;
    int by_label = !strcmp(group, "label");
    emb_set e;
    if ((rc = emb_load_arg(ep, "--emb", &e))) return rc;
    const int64_t *g = by_label ? e.labels : e.scene;
    if (!g) {
        rc = er_fail(ER_INPUT, "--emb: %s has no %s column (--group %s)", ep, group, group);
        emb_free(&e);
        return rc;
    }
    int *gi = xmalloc((size_t)(e.n ? e.n : 1) * sizeof(int));
    for (int i = 0; i < e.n; i++) gi[i] = (int)g[i];
    double al, un;
    int64_t np;
    align_uniform(e.x, e.n, e.dim, gi, &al, &un, &np);
    if (json) {
        printf("{\"n\": %d, \"group\": \"%s\", \"positive_pairs\": %lld, \"align\": ", e.n, group, (long long)np);
        json_put_num(stdout, al);
        printf(", \"uniform\": ");
        json_put_num(stdout, un);
        printf("}\n");
    } else {
        printf("alignment %.4f over %lld same-%s pairs (lower = closer), uniformity %.4f over %d rows (lower = more uniform)\n",
               al, (long long)np, group, un, e.n);
    }
    free(gi);
    emb_free(&e);
    return ER_OK;
}

int cmd_eval_split(int argc, char **argv) { return eval_split(argc, argv); }
int cmd_eval_align(int argc, char **argv) { return eval_align(argc, argv); }
