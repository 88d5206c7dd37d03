/* reid_views.c — see reid_views.h. */
#include "infer/eval/reid_views.h"
#include "nn/base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int in_list(int64_t v, const int64_t *l, int n) {
    for (int i = 0; i < n; i++) if (l[i] == v) return 1;
    return 0;
}

static const char *views_text(const emb_set *e, const int64_t *v, int n, char *buf, int size) {
    int o = 0;
    char one[64];
    buf[0] = 0;
    for (int i = 0; i < n && o < size; i++) o += snprintf(buf + o, (size_t)(size - o), "%s%s", i ? "," : "", emb_view_name(e, v[i], one, sizeof one));
    return buf;
}

/* row_of[s * nv + j] = the row of scene s with view v[j], -1 when absent; a second one is ER_INPUT
 * when `unique` (a fused or reference view must be one row). */
static int rows_by_scene_view(const emb_set *e, const int *scene_of, int ns, const int64_t *v, int nv, int unique,
                              const char *side, int *row_of) {
    for (int i = 0; i < ns * nv; i++) row_of[i] = -1;
    for (int i = 0; i < e->n; i++) {
        if (scene_of[i] < 0) continue;
        for (int j = 0; j < nv; j++) {
            if (e->view[i] != v[j]) continue;
            int *slot = &row_of[scene_of[i] * nv + j];
            char name[64];
            if (*slot >= 0 && unique)
                return er_fail(ER_INPUT, "re-ID: scene %lld has two rows with %s view %s (items %lld and %lld)",
                               (long long)e->scene[i], side, emb_view_name(e, v[j], name, sizeof name),
                               (long long)e->ids[*slot], (long long)e->ids[i]);
            *slot = i;
        }
    }
    return ER_OK;
}

/* the fused descriptor of scene s: mean of its views' normalised rows; 0 when one is missing */
static int fuse(const emb_set *e, emb_distance dist, const int *row_of, int s, int nv, float *out, float *tmp) {
    const int D = e->dim;
    memset(out, 0, sizeof *out * (size_t)D);
    for (int j = 0; j < nv; j++) {
        int r = row_of[s * nv + j];
        if (r < 0) return 0;
        memcpy(tmp, e->x + (size_t)r * D, sizeof *tmp * (size_t)D);
        dist_normalise(dist, tmp, D);
        for (int d = 0; d < D; d++) out[d] += tmp[d] / (float)nv;
    }
    return 1;
}

int reid_eval_views(const emb_set *e, const reid_views_cfg *c, reid_view_result *out) {
    memset(out, 0, sizeof *out);
    if (!e->scene || !e->view) return er_fail(ER_INPUT, "re-ID between views needs `scene` and `view` in the embedding file");
    if (c->k < 1) return er_fail(ER_INPUT, "re-ID: k must be >= 1");
    if (c->nrviews < 1) return er_fail(ER_INPUT, "re-ID: no reference view given");
    for (int j = 0; j < c->nqviews; j++)
        if (in_list(c->qviews[j], c->rviews, c->nrviews))
            return er_fail(ER_INPUT, "re-ID: view %lld is both a query and a reference view", (long long)c->qviews[j]);
    int rc = emb_distance_of(e, "re-ID", &out->dist);
    if (rc) return rc;
    if (c->bits > 0 && out->dist != DIST_COSINE)
        return er_fail(ER_INPUT, "re-ID: hashing (--bits) assumes cosine, the embedding file's distance is %s", emb_distance_name(out->dist));
    /* dense scene numbers 0..ns-1 over the file's scene values */
    int64_t *sv = xmalloc(sizeof *sv * (size_t)e->n);
    int ns = 0;
    for (int i = 0; i < e->n; i++) if (e->scene[i] >= 0) sv[ns++] = e->scene[i];
    qsort(sv, (size_t)ns, sizeof *sv, cmp_i64);
    int u = 0;
    for (int i = 0; i < ns; i++) if (!u || sv[u - 1] != sv[i]) sv[u++] = sv[i];
    ns = u;
    int *scene_of = xmalloc(sizeof *scene_of * (size_t)e->n);
    for (int i = 0; i < e->n; i++) {
        int64_t *hit = e->scene[i] >= 0 ? bsearch(&e->scene[i], sv, (size_t)ns, sizeof *sv, cmp_i64) : NULL;
        scene_of[i] = hit ? (int)(hit - sv) : -1;
    }
    const int D = e->dim, nrv = c->nrviews, nqv = c->nqviews, fused_q = nqv > 1;
    int *ref_row = xmalloc(sizeof(int) * (size_t)(ns ? ns : 1) * nrv), *q_row = xmalloc(sizeof(int) * (size_t)(ns ? ns : 1) * (nqv ? nqv : 1));
    float *rx = xmalloc(sizeof(float) * (size_t)(ns ? ns : 1) * D), *qx = xmalloc(sizeof(float) * (size_t)(e->n > ns ? e->n : ns) * D);
    float *tmp = xmalloc(sizeof(float) * (size_t)D);
    int64_t *rid = xmalloc(sizeof(int64_t) * (size_t)(ns ? ns : 1)), *qid = xmalloc(sizeof(int64_t) * (size_t)(e->n > ns ? e->n : ns));
    int *ref_of_scene = xmalloc(sizeof(int) * (size_t)(ns ? ns : 1));
    out->gt = xmalloc(sizeof *out->gt * (size_t)(e->n > ns ? e->n : ns));
    int nr = 0, nq = 0;
    char buf[256];
    rc = rows_by_scene_view(e, scene_of, ns, c->rviews, nrv, 1, "reference", ref_row);
    if (!rc && fused_q) rc = rows_by_scene_view(e, scene_of, ns, c->qviews, nqv, 1, "query", q_row);
    for (int s = 0; s < ns && !rc; s++) { /* references: one per scene that has every reference view */
        ref_of_scene[s] = -1;
        if (!fuse(e, out->dist, ref_row, s, nrv, rx + (size_t)nr * D, tmp)) continue;
        if (nrv == 1) memcpy(rx + (size_t)nr * D, e->x + (size_t)ref_row[s] * D, sizeof(float) * (size_t)D); /* as stored */
        rid[nr] = nrv == 1 ? e->ids[ref_row[s]] : sv[s];
        ref_of_scene[s] = nr++;
    }
    if (!rc && !nr) rc = er_fail(ER_INPUT, "re-ID: no scene has reference view%s %s", nrv > 1 ? "s" : "", views_text(e, c->rviews, nrv, buf, sizeof buf));
    int *qscene = xmalloc(sizeof(int) * (size_t)(e->n > ns ? e->n : ns));
    if (!rc && fused_q) {
        for (int s = 0; s < ns; s++)
            if (ref_of_scene[s] >= 0 && fuse(e, out->dist, q_row, s, nqv, qx + (size_t)nq * D, tmp)) { qid[nq] = sv[s]; qscene[nq++] = s; }
    } else if (!rc) {
        for (int i = 0; i < e->n; i++) {
            if (scene_of[i] < 0 || ref_of_scene[scene_of[i]] < 0) continue;
            if (nqv ? e->view[i] != c->qviews[0] : in_list(e->view[i], c->rviews, nrv)) continue;
            memcpy(qx + (size_t)nq * D, e->x + (size_t)i * D, sizeof(float) * (size_t)D);
            qid[nq] = e->ids[i];
            qscene[nq++] = scene_of[i];
        }
    }
    if (!rc && !nq)
        rc = er_fail(ER_INPUT, "re-ID: no query: no scene with reference view%s %s has %s%s", nrv > 1 ? "s" : "",
                     views_text(e, c->rviews, nrv, buf, sizeof buf), nqv ? (nqv > 1 ? "all of the query views " : "query view ") : "another view",
                     nqv ? views_text(e, c->qviews, nqv, buf + 128, 128) : "");
    if (!rc) {
        int kk = c->k < nr ? c->k : nr;
        int64_t *nid = xmalloc(sizeof *nid * (size_t)nq * kk);
        double *score = xmalloc(sizeof *score * (size_t)nq * kk);
        int *cnt = xmalloc(sizeof *cnt * (size_t)nq);
        rc = c->bits > 0 ? dist_topk_hashed(c->bits == D ? HASH_SIGN : c->hash, c->bits, c->seed, rx, rid, nr, qx, nq, D, kk, nid, score, cnt)
                         : dist_topk(out->dist, rx, rid, nr, qx, nq, D, kk, nid, score, cnt);
        if (!rc) {
            out->pred = xmalloc(sizeof *out->pred * (size_t)nq * kk);
            for (int q = 0; q < nq; q++) {
                out->gt[q] = (reid_gt){qid[q], rid[ref_of_scene[qscene[q]]]};
                for (int j = 0; j < cnt[q]; j++) out->pred[out->npred++] = (reid_pred){qid[q], nid[(size_t)q * kk + j], score[(size_t)q * kk + j]};
            }
            out->ngt = nq;
            rc = reid_metrics(out->pred, out->npred, out->gt, out->ngt, &out->r);
        }
        out->nqueries = nq;
        out->nrefs = nr;
        out->k = kk;
        free(nid); free(score); free(cnt);
    }
    { /* scenes that have a query */
        char *seen = xcalloc((size_t)(ns ? ns : 1), 1);
        for (int q = 0; q < nq; q++) if (!seen[qscene[q]]) seen[qscene[q]] = 1, out->nscenes++;
        free(seen);
    }
    free(sv); free(scene_of); free(ref_row); free(q_row); free(rx); free(qx); free(tmp); free(rid); free(qid);
    free(ref_of_scene); free(qscene);
    if (rc) reid_view_result_free(out);
    return rc;
}

void reid_view_result_free(reid_view_result *r) {
    free(r->pred);
    free(r->gt);
    r->pred = NULL;
    r->gt = NULL;
    r->npred = r->ngt = 0;
}

int reid_eval_ref_view(const emb_set *e, int64_t ref_view, int k, reid_view_result *out) {
    reid_views_cfg c = {.rviews = &ref_view, .nrviews = 1, .k = k};
    return reid_eval_views(e, &c, out);
}
