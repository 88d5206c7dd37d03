/* seq_folds.c — see seq_folds.h. */
#include "infer/eval/seq_folds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

static int same_i64(const int64_t *x, const int64_t *y, int n) {
    if (!x || !y) return x == y;
    return !memcmp(x, y, sizeof *x * (size_t)n);
}

int seq_fold_of_rows(const emb_set *e, const manifest *m, int *fold, int *nfolds) {
    const char *mf = m->file ? m->file : "the folds manifest";
    *nfolds = 0;
    if (!e->scene) return er_fail(ER_INPUT, "folds: the embedding file has no scene ids");
    for (int i = 0; i < e->n; i++) {
        int64_t r = e->ids[i];
        if (r < 0 || r >= m->n)
            return er_fail(ER_INPUT, "folds: embedding row %d is manifest row %lld, but %s has %d rows (embed the manifest that was split)", i,
                           (long long)r, mf, m->n);
        const manifest_row *row = &m->rows[r];
        char want[64];
        if (e->scene_names) snprintf(want, sizeof want, "%s", e->scene[i] >= 0 && e->scene[i] < e->nscene_names ? e->scene_names[e->scene[i]] : "");
        else snprintf(want, sizeof want, "%lld", (long long)e->scene[i]);
        if (!row->scene || strcmp(row->scene, want))
            return er_fail(ER_INPUT, "folds: %s line %lld has scene '%s' but embedding row %d has scene '%s' (embed the manifest that was split)",
                           mf, (long long)r + 2, row->scene ? row->scene : "", i, want);
        char *end = NULL;
        long k = row->split && !strncmp(row->split, "fold", 4) ? strtol(row->split + 4, &end, 10) : -1;
        if (k < 0 || k > 1000 || !end || *end || end == row->split + 4)
            return er_fail(ER_INPUT, "folds: %s line %lld: split '%s' is not fold<k> (data split --by scene --folds K writes them)", mf,
                           (long long)r + 2, row->split ? row->split : "");
        fold[i] = (int)k;
        if (k + 1 > *nfolds) *nfolds = (int)k + 1;
    }
    int *seen = xcalloc((size_t)(*nfolds ? *nfolds : 1), sizeof *seen);
    for (int i = 0; i < e->n; i++) seen[fold[i]] = 1;
    for (int k = 0; k < *nfolds; k++)
        if (!seen[k]) {
            free(seen);
            return er_fail(ER_INPUT, "folds: %s has fold%d..fold%d but no frame of the embedding file is in fold%d", mf, 0, *nfolds - 1, k);
        }
    free(seen);
    return ER_OK;
}

static int check_same_frames(const emb_set *es, int nf) {
    for (int f = 1; f < nf; f++) {
        const emb_set *a = &es[0], *b = &es[f];
        if (a->n != b->n || a->dim != b->dim || !same_i64(a->ids, b->ids, a->n) || !same_i64(a->scene, b->scene, a->n) ||
            !same_i64(a->view, b->view, a->n))
            return er_fail(ER_INPUT, "folds: file %d holds other frames than file 0 (n, dim, ids, scene or view differ)", f);
        if (strcmp(a->distance ? a->distance : "cosine", b->distance ? b->distance : "cosine"))
            return er_fail(ER_INPUT, "folds: file %d's distance differs from file 0's", f);
    }
    return ER_OK;
}

int seq_eval_files(const emb_set *es, int nf, const int *fold, const seq_gap *g, seq_result *out) {
    memset(out, 0, sizeof *out);
    int rc = check_same_frames(es, nf);
    if (rc) return rc;
    if (nf == 1) return seq_eval_emb(&es[0], g, out);
    const emb_set *e = &es[0];
    if (!e->scene || !e->view || e->nview_names)
        return seq_eval_emb(e, g, out); /* its message: no scene / view, or views that are names */
    emb_distance d;
    if ((rc = emb_distance_of(e, "sequence protocol", &d))) return rc;
    const float **E = xmalloc(sizeof *E * (size_t)nf);
    for (int f = 0; f < nf; f++) E[f] = es[f].x;
    rc = seq_eval_folded(E, nf, fold, e->n, e->dim, d, e->scene, e->view, g, out);
    free(E);
    return rc;
}

/* fold of a query id of the 2-vs-2 file: a scene value (fused query views) or a row id (one view) */
static int fold_of_query(const emb_set *e, const int *fold, int64_t q, int by_scene) {
    for (int i = 0; i < e->n; i++)
        if ((by_scene ? e->scene[i] : e->ids[i]) == q) return fold[i];
    return -1;
}

int seq_two_vs_two_files(const emb_set *es, int nf, const int *fold, int only, int k, mv_row rows[9], reid_view_result keep[9],
                         int *nseq, int *nshort) {
    const int pool = nf > 1 || only >= 0; /* else file 0 as it scores every query */
    memset(keep, 0, sizeof *keep * 9);
    int rc = check_same_frames(es, nf);
    for (int f = 0; f < nf && !rc; f++) {
        emb_set four;
        mv_row r[9];
        reid_view_result kf[9];
        if ((rc = seq_pick_four(&es[f], &four, nshort))) break;
        *nseq = four.n / 4;
        int *fold4 = xmalloc(sizeof *fold4 * (size_t)four.n); /* the folds of the 4 frames per sequence kept */
        for (int t = 0; t < four.n && pool; t++) fold4[t] = fold_of_query(&es[f], fold, four.ids[t], 0);
        const int mine = nf > 1 ? f : only; /* the fold whose queries this file scores */
        rc = multiview_eval_keep(&four, k, 0, 0, r, kf);
        if (!rc && !pool) {
            memcpy(rows, r, sizeof r), memcpy(keep, kf, sizeof kf);
        } else if (!rc) {
            for (int o = 0; o < 9; o++) {
                int by_scene = r[o].qmask == 3; /* fused Q1Q2: queries are scene values */
                reid_view_result *d = &keep[o];
                if (f == 0) {
                    rows[o] = r[o];
                    d->nrefs = kf[o].nrefs, d->nscenes = kf[o].nscenes, d->k = kf[o].k, d->dist = kf[o].dist;
                    d->pred = xmalloc(sizeof *d->pred * (size_t)(kf[o].npred ? kf[o].npred : 1) * nf);
                    d->gt = xmalloc(sizeof *d->gt * (size_t)(kf[o].ngt ? kf[o].ngt : 1) * nf);
                }
                for (int64_t t = 0; t < kf[o].ngt; t++)
                    if (fold_of_query(&four, fold4, kf[o].gt[t].q, by_scene) == mine) d->gt[d->ngt++] = kf[o].gt[t];
                for (int64_t t = 0; t < kf[o].npred; t++)
                    if (fold_of_query(&four, fold4, kf[o].pred[t].q, by_scene) == mine)
                        d->pred[d->npred++] = kf[o].pred[t];
                reid_view_result_free(&kf[o]);
            }
        }
        free(fold4);
        emb_free(&four);
    }
    if (!rc && pool)
        for (int o = 0; o < 9 && !rc; o++) {
            keep[o].nqueries = (int)keep[o].ngt;
            rc = reid_metrics(keep[o].pred, keep[o].npred, keep[o].gt, keep[o].ngt, &keep[o].r);
            rows[o].r = keep[o].r;
        }
    if (rc)
        for (int o = 0; o < 9; o++) reid_view_result_free(&keep[o]);
    return rc;
}
