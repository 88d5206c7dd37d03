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

static int eval_split(int argc, char **argv) {
    const char *trp = NULL, *tep = NULL, *classifier = "knn", *vote = "weighted";
    int k = 290, json = 0, seed = 0, B = BOOTSTRAP_DEFAULT_N;
    double tau = 0.1, l2 = 1e-3, percent = 100;
    arg_spec specs[] = {
        {"train", ARG_STR, &trp, "labelled embeddings: the kNN bank / the probe's training rows"},
        {"test", ARG_STR, &tep, "labelled embeddings of the test rows (labels matched by name)"},
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
    int probe = !strcmp(classifier, "probe");
    int weighted = !strcmp(vote, "weighted");
    emb_set tr, te;
    if ((rc = emb_load_arg(trp, "--train", &tr))) return rc;
    if ((rc = emb_load_arg(tep, "--test", &te))) { emb_free(&tr); return rc; }
    int *ytr = xmalloc((size_t)(tr.n ? tr.n : 1) * sizeof(int)), *yte = xmalloc((size_t)(te.n ? te.n : 1) * sizeof(int));
    int *pred = xmalloc((size_t)(te.n ? te.n : 1) * sizeof(int)), C = tr.nlabel_names, kept = 0;
    uint8_t *keep = xmalloc((size_t)(tr.n ? tr.n : 1));
    if ((rc = emb_require_cosine(&tr, "--train")) || (rc = emb_require_cosine(&te, "--test"))) goto out;
    if (tr.dim != te.dim) { rc = er_fail(ER_INPUT, "--train is %d-d, --test %d-d", tr.dim, te.dim); goto out; }
    if (!tr.labels || !te.labels) { rc = er_fail(ER_INPUT, "%s has no labels", !tr.labels ? trp : tep); goto out; }
    for (int i = 0; i < tr.n; i++) ytr[i] = (int)tr.labels[i];
    if ((rc = labels_by_name(&te, &tr, "--test", yte))) goto out;
    if (C < 2) { rc = er_fail(ER_INPUT, "--train: classification needs at least 2 labels"); goto out; }
    kept = label_subset(ytr, tr.n, percent, (uint64_t)seed, keep);
    for (int i = 0; i < tr.n; i++) if (!keep[i]) ytr[i] = -1; /* unlabelled: no vote, not trained on */
    rc = probe ? probe_split(tr.x, ytr, tr.n, te.x, te.n, tr.dim, C, l2, pred, NULL)
               : knn_split(tr.x, ytr, tr.n, te.x, te.n, tr.dim, C, k, weighted, tau, pred);
    if (rc) goto out;
    double *right = xmalloc(sizeof(double) * (te.n ? te.n : 1)), lo = NAN, hi = NAN, acc = 0;
    int m = 0;
    int64_t *conf = xcalloc((size_t)C * C, sizeof(int64_t));
    for (int i = 0; i < te.n; i++) {
        if (yte[i] < 0) continue;
        right[m++] = pred[i] == yte[i];
        acc += pred[i] == yte[i];
        if (pred[i] >= 0) conf[(size_t)yte[i] * C + pred[i]]++;
    }
    if (!m) { rc = er_fail(ER_INPUT, "--test: no labelled rows"); free(right); free(conf); goto out; }
    acc /= m;
    if (B) bootstrap_mean_interval(right, m, B, BOOTSTRAP_SEED, &lo, &hi);
    if (json) {
        printf("{\"classifier\": \"%s\", \"train\": %d, \"train_labelled\": %d, \"label_percent\": %g, \"test\": %d, ", classifier,
               tr.n, kept, percent, m);
        if (!probe) printf("\"k\": %d, \"vote\": \"%s\", \"tau\": %g, ", k, vote, tau);
        printf("\"accuracy\": ");
        json_put_num(stdout, acc);
        if (B) { printf(", \"accuracy_lo\": "); json_put_num(stdout, lo); printf(", \"accuracy_hi\": "); json_put_num(stdout, hi); }
        printf(", \"sensitivity\": {");
        for (int c = 0; c < C; c++) {
            int64_t n = 0;
            for (int b = 0; b < C; b++) n += conf[(size_t)c * C + b];
            printf("%s", c ? ", " : "");
            json_put_str(stdout, tr.label_names[c]);
            printf(": ");
            json_put_num(stdout, n ? (double)conf[(size_t)c * C + c] / n : NAN);
        }
        printf("}}\n");
    } else {
        if (probe) printf("linear probe (softmax regression, L2 %g, standardised)", l2);
        else printf("kNN, %s vote, k = %d%s", vote, k, weighted ? "" : "");
        if (!probe && weighted) printf(", tau %g", tau);
        printf(": trained on %d of %d rows (%g%% of the labels, seed %d), tested on %d\n", kept, tr.n, percent, seed, m);
        printf("  accuracy %.4f", acc);
        if (B) printf("   95%% interval (bootstrap over test rows, %d replicates) [%.4f, %.4f]", B, lo, hi);
        printf("\n  sensitivity per class:");
        for (int c = 0; c < C; c++) {
            int64_t n = 0;
            for (int b = 0; b < C; b++) n += conf[(size_t)c * C + b];
            printf("  %s %.4f", tr.label_names[c], n ? (double)conf[(size_t)c * C + c] / n : NAN);
        }
        printf("\n");
    }
    free(right); free(conf);
out:
    free(ytr); free(yte); free(pred); free(keep);
    emb_free(&tr); emb_free(&te);
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
