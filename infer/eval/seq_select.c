/* seq_select.c — see seq_select.h. */
#include "infer/eval/seq_select.h"

#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/hybrid.h"
#include "nn/base/base.h"

void seq_weight_choice_free(seq_weight_choice *c) {
    free(c->grid), free(c->map), free(c->chosen);
    memset(c, 0, sizeof *c);
}

/* The frames outside fold k and the rows of the nf - 1 files that score them: file j of the folds
 * other than k is set j (j < k) or j - 1 (j > k), which[] the set of each frame's own fold. */
typedef struct {
    int n, D;
    int *which;
    int64_t *scene, *view;
    float **E; /* [nf - 1] n * D */
} fold_rest;

static void rest_free(fold_rest *r, int nf) {
    for (int f = 0; f < nf - 1; f++) free(r->E[f]);
    free(r->E), free(r->which), free(r->scene), free(r->view);
}

static void rest_make(const emb_set *hy, int nf, const int *fold, int k, fold_rest *r) {
    const emb_set *e = &hy[0];
    r->D = e->dim, r->n = 0;
    r->which = xmalloc(sizeof *r->which * (size_t)e->n);
    r->scene = xmalloc(sizeof *r->scene * (size_t)e->n);
    r->view = xmalloc(sizeof *r->view * (size_t)e->n);
    r->E = xcalloc((size_t)nf - 1, sizeof *r->E);
    for (int f = 0; f < nf - 1; f++) r->E[f] = xmalloc(sizeof **r->E * (size_t)e->n * r->D);
    for (int i = 0; i < e->n; i++) {
        if (fold[i] == k) continue;
        for (int f = 0; f < nf; f++)
            if (f != k) memcpy(r->E[f - (f > k)] + (size_t)r->n * r->D, hy[f].x + (size_t)i * r->D, sizeof **r->E * (size_t)r->D);
        r->which[r->n] = fold[i] - (fold[i] > k), r->scene[r->n] = e->scene[i], r->view[r->n] = e->view[i];
        r->n++;
    }
}

int seq_select_hybrid_weight(const emb_set *es, int nf, const emb_set *hist, const int *fold, const seq_gap *g,
                             const double *grid, int ngrid, seq_weight_choice *out) {
    memset(out, 0, sizeof *out);
    if (nf < 2) return er_fail(ER_INPUT, "hybrid weight on training folds: %d file(s): one per fold, at least 2 folds", nf);
    if (ngrid < 1) return er_fail(ER_INPUT, "hybrid weight on training folds: no weight to try");
    for (int t = 0; t < ngrid; t++)
        if (!(grid[t] >= 0 && grid[t] <= 1)) return er_fail(ER_INPUT, "hybrid weight on training folds: weight %g is outside [0, 1]", grid[t]);
    const int n = es[0].n;
    if (!es[0].scene || !es[0].view || es[0].nview_names)
        return er_fail(ER_INPUT, "hybrid weight on training folds: the files need scene and integer view (frame position) ids");
    int *seen = xcalloc((size_t)nf, sizeof *seen);
    for (int i = 0; i < n; i++) {
        if (fold[i] < 0 || fold[i] >= nf) {
            free(seen);
            return er_fail(ER_INPUT, "hybrid weight on training folds: frame %d is in fold %d, but %d files were given (one per fold)", i,
                           fold[i], nf);
        }
        seen[fold[i]] = 1;
    }
    for (int f = 0; f < nf; f++)
        if (!seen[f]) {
            free(seen);
            return er_fail(ER_INPUT, "hybrid weight on training folds: no frame is in fold %d (file %d has no queries)", f, f);
        }
    free(seen);
    out->nfolds = nf, out->ngrid = ngrid;
    out->grid = xmalloc(sizeof *out->grid * (size_t)ngrid);
    memcpy(out->grid, grid, sizeof *grid * (size_t)ngrid);
    out->map = xmalloc(sizeof *out->map * (size_t)nf * ngrid);
    out->chosen = xcalloc((size_t)nf, sizeof *out->chosen);
    emb_set *hy = xcalloc((size_t)nf, sizeof *hy);
    int rc = ER_OK;
    for (int t = 0; t < ngrid && !rc; t++) {
        for (int f = 0; f < nf && !rc; f++)
            if ((rc = emb_hybrid(&es[f], hist, grid[t], &hy[f]))) rc = er_fail(rc, "file %d: %s", f, er_msg());
        for (int k = 0; k < nf && !rc; k++) {
            fold_rest r;
            rest_make(hy, nf, fold, k, &r);
            seq_result s;
            rc = seq_eval_folded((const float *const *)r.E, nf - 1, r.which, r.n, r.D, DIST_COSINE, r.scene, r.view, g, &s);
            if (rc) rc = er_fail(rc, "held-out fold %d, weight %g: %s", k, grid[t], er_msg());
            else out->map[(size_t)k * ngrid + t] = s.map, seq_result_free(&s);
            rest_free(&r, nf);
        }
        for (int f = 0; f < nf; f++) emb_free(&hy[f]);
    }
    free(hy);
    if (rc) { seq_weight_choice_free(out); return rc; }
    for (int k = 0; k < nf; k++)
        for (int t = 1; t < ngrid; t++)
            if (out->map[(size_t)k * ngrid + t] > out->map[(size_t)k * ngrid + out->chosen[k]]) out->chosen[k] = t;
    return ER_OK;
}
