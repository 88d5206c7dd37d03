/* embed_hybrid.c — see embed_hybrid.h. */
#include "cli/embed_hybrid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common_opts.h"
#include "cli/seq_desc.h"
#include "infer/eval/seq_select.h"
#include "infer/retrieval/hybrid.h"
#include "nn/base/args.h"
#include "nn/base/base.h"

int embed_wants_hybrid(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--hybrid") || !strncmp(argv[i], "--hybrid=", 9)) return 1;
    return 0;
}

/* the comma-separated --out list into nf paths (pointers into `copy`) */
static int split_outs(char *copy, char **outs, int nf) {
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == nf) return er_fail(ER_INPUT, "--out: more files than the %d of --hybrid", nf);
        outs[n++] = t;
    }
    return n == nf ? ER_OK : er_fail(ER_INPUT, "--out: %d file(s) for the %d of --hybrid (one output per input, fold 0 first)", n, nf);
}

/* --select-weight: each fold's weight from its training folds, printed as a table (or JSON) */
static int select_weights(const seq_desc *d, const emb_set *h, const char *grid_s, const seq_gap *g, int json, double *w) {
    double *grid;
    int ng, rc = args_double_list(grid_s, "--select-weight", &grid, &ng);
    seq_weight_choice c; /* seq_select_hybrid_weight refuses a weight outside [0, 1], naming it */
    if (!rc && (rc = seq_select_hybrid_weight(d->es, d->nf, h, d->fold, g, grid, ng, &c))) rc = er_fail(rc, "--select-weight: %s", er_msg());
    if (rc) {
        free(grid);
        return rc;
    }
    if (!json) {
        printf("hybrid weight of each held-out fold, chosen on the other folds only (mAP of the sequence protocol, "
               "their queries and gallery):\n  fold");
        for (int t = 0; t < ng; t++) printf("  w %-5g", grid[t]);
        printf("  chosen\n");
    } else {
        printf("{\"select_weight\": [");
    }
    for (int k = 0; k < d->nf; k++) {
        w[k] = grid[c.chosen[k]];
        if (json) {
            printf("%s{\"fold\": %d, \"chosen\": %g, \"inner_map\": [", k ? ", " : "", k, w[k]);
            for (int t = 0; t < ng; t++) printf("%s%.6f", t ? ", " : "", c.map[(size_t)k * ng + t]);
            printf("]}");
        } else {
            printf("  %4d", k);
            for (int t = 0; t < ng; t++) printf("  %7.4f", c.map[(size_t)k * ng + t]);
            printf("  %g\n", w[k]);
        }
    }
    if (json) printf("]}\n");
    seq_weight_choice_free(&c);
    free(grid);
    return ER_OK;
}

int embed_hybrid(int argc, char **argv) {
    const char *a_path = NULL, *h_path = NULL, *out = NULL, *folds = NULL, *grid_s = NULL;
    double w = -1, frac = SEQ_DEFAULT_GAP_FRAC;
    int json = 0, gap = 0;
    arg_spec specs[] = {
        {"hybrid", ARG_STR, &a_path, "learned descriptors (cosine) of a manifest's rows; with --folds one file per fold, comma-separated",
         .required = 1},
        {"hist", ARG_STR, &h_path, "colour histograms of the same rows (embed --baseline colorhist)", .required = 1},
        {"hist-weight", ARG_DOUBLE, &w, "the histogram's share w of the similarity: (1 - w) cosine + w Bhattacharyya", "[0, 1]"},
        {"select-weight", ARG_STR, &grid_s, "with --folds, instead of --hist-weight: the weights tried, e.g. 0,0.25,0.5; each fold "
                                            "takes the best on its training folds (infer/eval/seq_select.h)"},
        {"folds", ARG_STR, &folds, "leave-sequences-out folds (data split --by scene --folds K): --hybrid and --out list K files"},
        OPT_GAP(&gap),
        OPT_GAP_FRAC(&frac),
        OPT_OUT(&out, "output embedding file (.safetensors); with --folds one per fold, comma-separated", .required = 1),
        OPT_JSON(&json),
    };
    int rc = args_parse(argc, argv, specs, sizeof specs / sizeof *specs,
                        "endoret embed --hybrid A.safetensors --hist H.safetensors --hist-weight W --out F.safetensors\n"
                        "       endoret embed --hybrid A0,..,A{K-1} --hist H --folds FOLDS.csv (--hist-weight W | --select-weight W1,W2,..) "
                        "--out F0,..,F{K-1}",
                        NULL, NULL);
    if (rc == ARGS_HELP) return ER_OK;
    if (rc) return rc;
    if ((w >= 0) == (grid_s != NULL)) return er_fail(ER_INPUT, "--hybrid: give one of --hist-weight and --select-weight");
    if (grid_s && !folds) return er_fail(ER_INPUT, "--select-weight needs --folds (the weight is chosen on training folds)");
    seq_desc d;
    emb_set h = {0};
    if ((rc = seq_desc_load(a_path, folds, -1, "--hybrid", 0, &d))) return rc;
    if ((rc = emb_load_arg(h_path, "--hist", &h))) { seq_desc_free(&d); return rc; }
    char *copy = xstrdup(out), **outs = xcalloc((size_t)d.nf, sizeof *outs);
    double *wf = xmalloc(sizeof *wf * (size_t)d.nf);
    for (int f = 0; f < d.nf; f++) wf[f] = w;
    seq_gap g = {gap, frac};
    if (!(rc = split_outs(copy, outs, d.nf)) && grid_s) rc = select_weights(&d, &h, grid_s, &g, json, wf);
    for (int f = 0; f < d.nf && !rc; f++) {
        emb_set o = {0};
        rc = emb_hybrid(&d.es[f], &h, wf[f], &o);
        if (rc) rc = er_fail(rc, "%s + %s: %s", d.nf > 1 ? "a file of --hybrid" : a_path, h_path, er_msg());
        if (!rc) rc = emb_save(outs[f], &o);
        if (!rc && json) printf("{\"out\": \"%s\", \"n\": %d, \"dim\": %d, \"hist_weight\": %g}\n", outs[f], o.n, o.dim, wf[f]);
        else if (!rc) printf("embed: hybrid of %d rows, histogram weight %g -> %s (%d-d: %s)\n", o.n, wf[f], outs[f], o.dim, o.model);
        emb_free(&o);
    }
    free(copy), free(outs), free(wf);
    seq_desc_free(&d), emb_free(&h);
    return rc;
}
