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

/* the k of manifest row r's split "fold<k>" (ER_INPUT naming the line otherwise) */
static int fold_of_row(const manifest *m, int64_t r, int *k) {
    const manifest_row *row = &m->rows[r];
    char *end = NULL;
    long v = row->split && !strncmp(row->split, "fold", 4) ? strtol(row->split + 4, &end, 10) : -1;
    if (v < 0 || v > 1000 || !end || *end || end == row->split + 4)
        return er_fail(ER_INPUT, "folds: %s line %lld: split '%s' is not fold<k> (data split --by scene --folds K writes them)",
                       m->file ? m->file : "the folds manifest", (long long)r + 2, row->split ? row->split : "");
    *k = (int)v;
    return ER_OK;
}

static int all_folds_seen(const emb_set *e, const manifest *m, const int *fold, int nfolds);

/* the scene value of row i as the manifest writes it */
static void scene_text(const emb_set *e, int i, char *buf, size_t size) {
    if (e->scene_names) snprintf(buf, size, "%s", e->scene[i] >= 0 && e->scene[i] < e->nscene_names ? e->scene_names[e->scene[i]] : "");
    else snprintf(buf, size, "%lld", (long long)e->scene[i]);
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
        scene_text(e, i, want, sizeof want);
        if (!row->scene || strcmp(row->scene, want))
            return er_fail(ER_INPUT, "folds: %s line %lld has scene '%s' but embedding row %d has scene '%s' (embed the manifest that was split)",
                           mf, (long long)r + 2, row->scene ? row->scene : "", i, want);
        if (fold_of_row(m, r, &fold[i])) return ER_INPUT;
        if (fold[i] + 1 > *nfolds) *nfolds = fold[i] + 1;
    }
    return all_folds_seen(e, m, fold, *nfolds);
}

int seq_fold_of_scenes(const emb_set *e, const manifest *m, int *fold, int *nfolds) {
    const char *mf = m->file ? m->file : "the folds manifest";
    *nfolds = 0;
    if (!e->scene) return er_fail(ER_INPUT, "folds: the embedding file has no scene ids");
    for (int i = 0; i < e->n; i++) {
        char want[64];
        scene_text(e, i, want, sizeof want);
        int r = 0;
        while (r < m->n && (!m->rows[r].scene || strcmp(m->rows[r].scene, want))) r++;
        if (r == m->n) return er_fail(ER_INPUT, "folds: embedding row %d has scene '%s', which %s does not hold", i, want, mf);
        if (fold_of_row(m, r, &fold[i])) return ER_INPUT;
        if (fold[i] + 1 > *nfolds) *nfolds = fold[i] + 1;
    }
    return all_folds_seen(e, m, fold, *nfolds);
}

static int all_folds_seen(const emb_set *e, const manifest *m, const int *fold, int nfolds) {
    const char *mf = m->file ? m->file : "the folds manifest";
    int *seen = xcalloc((size_t)(nfolds ? nfolds : 1), sizeof *seen);
    for (int i = 0; i < e->n; i++) seen[fold[i]] = 1;
    for (int k = 0; k < nfolds; k++)
        if (!seen[k]) {
            free(seen);
            return er_fail(ER_INPUT, "folds: %s has fold%d..fold%d but no row of the embedding file is in fold%d", mf, 0, nfolds - 1, k);
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

/* query id -> fold, sorted by id for bsearch: a frame file's queries number in the thousands, and a
 * scan of the rows for each of their k predictions would be quadratic */
typedef struct { int64_t key; int fold; } key_fold;
static int cmp_key_fold(const void *a, const void *b) {
    int64_t x = ((const key_fold *)a)->key, y = ((const key_fold *)b)->key;
    return (x > y) - (x < y);
}
static int fold_of_key(const key_fold *ix, int n, int64_t q) {
    key_fold want = {q, 0}, *hit = bsearch(&want, ix, (size_t)n, sizeof *ix, cmp_key_fold);
    return hit ? hit->fold : -1;
}

int reid_views_files(const emb_set *es, int nf, const int *fold, const reid_views_cfg *c, reid_view_result *out) {
    memset(out, 0, sizeof *out);
    int rc = check_same_frames(es, nf);
    if (rc || nf == 1) return rc ? rc : reid_eval_views(&es[0], c, out);
    const int by_scene = c->nqviews > 1; /* fused query views: a query id is a scene value (one fold a scene) */
    const int n = es[0].n;
    key_fold *ix = xmalloc(sizeof *ix * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) ix[i] = (key_fold){by_scene ? es[0].scene[i] : es[0].ids[i], fold[i]};
    qsort(ix, (size_t)n, sizeof *ix, cmp_key_fold);
    for (int f = 0; f < nf && !rc; f++) {
        reid_view_result kf;
        if ((rc = reid_eval_views(&es[f], c, &kf))) { rc = er_fail(rc, "file %d: %s", f, er_msg()); break; }
        if (f == 0) {
            out->nrefs = kf.nrefs, out->nscenes = kf.nscenes, out->k = kf.k, out->dist = kf.dist;
            out->pred = xmalloc(sizeof *out->pred * (size_t)(kf.npred ? kf.npred : 1) * nf);
            out->gt = xmalloc(sizeof *out->gt * (size_t)(kf.ngt ? kf.ngt : 1) * nf);
        }
        for (int64_t t = 0; t < kf.ngt; t++)
            if (fold_of_key(ix, n, kf.gt[t].q) == f) out->gt[out->ngt++] = kf.gt[t];
        for (int64_t t = 0; t < kf.npred; t++)
            if (fold_of_key(ix, n, kf.pred[t].q) == f) out->pred[out->npred++] = kf.pred[t];
        reid_view_result_free(&kf);
    }
    free(ix);
    if (!rc && !out->ngt) rc = er_fail(ER_INPUT, "folds: no query of any fold has a reference");
    if (!rc) {
        out->nqueries = (int)out->ngt;
        rc = reid_metrics(out->pred, out->npred, out->gt, out->ngt, &out->r);
    }
    if (rc) reid_view_result_free(out);
    return rc;
}
