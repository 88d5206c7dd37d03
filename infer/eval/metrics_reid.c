/* metrics_reid.c — uAP, Acc@1 and Recall@P90 exactly as the ISC2021 evaluation code defines them. */
#include "infer/eval/metrics.h"
#include "infer/retrieval/index.h"
#include "nn/base/base.h"

#include <stdlib.h>
#include <string.h>

static int cmp_gt(const void *a, const void *b) {
    const reid_gt *x = a, *y = b;
    if (x->q != y->q) return x->q < y->q ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

typedef struct { double score; int tp; int64_t q, r; } scored;

/* score descending, then false positives first (pessimistic) */
static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->tp - y->tp;
}
static int cmp_qr(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->q != y->q) return x->q < y->q ? -1 : 1;
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    return 0;
}

int reid_metrics(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, reid_result *out) {
    memset(out, 0, sizeof *out);
    if (ngt <= 0) return er_fail(ER_INPUT, "re-identification: the ground truth has no pairs");
    reid_gt *g = xmalloc((size_t)ngt * sizeof *g);
    memcpy(g, gt, (size_t)ngt * sizeof *g);
    qsort(g, (size_t)ngt, sizeof *g, cmp_gt);
    scored *s = xmalloc((size_t)(np > 0 ? np : 1) * sizeof *s);
    for (int64_t i = 0; i < np; i++) {
        reid_gt key = {p[i].q, p[i].r};
        s[i].score = p[i].score;
        s[i].q = p[i].q;
        s[i].r = p[i].r;
        s[i].tp = bsearch(&key, g, (size_t)ngt, sizeof *g, cmp_gt) != NULL;
    }
    /* duplicates: sort by (q, r) first */
    qsort(s, (size_t)np, sizeof *s, cmp_qr);
    for (int64_t i = 1; i < np; i++)
        if (s[i].q == s[i - 1].q && s[i].r == s[i - 1].r) {
            long long q = s[i].q, r = s[i].r;
            free(s); free(g);
            return er_fail(ER_INPUT, "re-identification: duplicate prediction (query %lld, reference %lld)", q, r);
        }
    /* Acc@1: for each GT pair, rank = #{predictions of q with score >= score(q, r)} - 1.
     * Predictions are grouped by q (sorted above). */
    int64_t top1 = 0;
    for (int64_t i = 0, j; i < np; i = j) {
        for (j = i; j < np && s[j].q == s[i].q; j++) {}
        for (int64_t a = i; a < j; a++) {
            if (!s[a].tp) continue;
            int64_t ge = 0;
            for (int64_t b = i; b < j; b++) ge += s[b].score >= s[a].score;
            if (ge - 1 == 0) top1++;
        }
    }
    out->acc1 = (double)top1 / (double)ngt;
    qsort(s, (size_t)np, sizeof *s, cmp_scored);
    int64_t tp = 0;
    double prev_r = 0, ap = 0;
    for (int64_t i = 0; i < np; i++) {
        tp += s[i].tp;
        double P = (double)tp / (double)(i + 1), R = (double)tp / (double)ngt;
        ap += (R - prev_r) * P;
        prev_r = R;
        if (P >= 0.9 && (!out->has_p90 || R > out->recall_p90 ||
                         (R == out->recall_p90 && s[i].score < out->thr_p90))) {
            out->has_p90 = 1;
            out->recall_p90 = R;
            out->thr_p90 = s[i].score;
        }
    }
    out->uap = ap;
    free(s);
    free(g);
    return ER_OK;
}

int reid_eval_ref_view(const emb_set *e, int64_t ref_view, int k, reid_view_result *out) {
    memset(out, 0, sizeof *out);
    if (!e->scene || !e->view) return er_fail(ER_INPUT, "re-ID against a reference view needs `scene` and `view` in the embedding file");
    if (k < 1) return er_fail(ER_INPUT, "re-ID: k must be >= 1");
    int64_t maxs = -1;
    for (int i = 0; i < e->n; i++) if (e->scene[i] > maxs) maxs = e->scene[i];
    if (maxs < 0) return er_fail(ER_INPUT, "re-ID: no scene ids in the embedding file");
    int64_t *ref_of = xmalloc((size_t)(maxs + 1) * sizeof *ref_of); /* scene -> row of its reference */
    for (int64_t s = 0; s <= maxs; s++) ref_of[s] = -1;
    int nr = 0, nq = 0, rc = ER_OK;
    for (int i = 0; i < e->n && !rc; i++) {
        if (e->view[i] != ref_view || e->scene[i] < 0) continue;
        if (ref_of[e->scene[i]] >= 0)
            rc = er_fail(ER_INPUT, "re-ID: scene %lld has two rows with reference view %lld (items %lld and %lld)",
                         (long long)e->scene[i], (long long)ref_view, (long long)e->ids[ref_of[e->scene[i]]], (long long)e->ids[i]);
        ref_of[e->scene[i]] = i;
        nr++;
    }
    for (int i = 0; i < e->n && !rc; i++)
        nq += e->scene[i] >= 0 && e->view[i] != ref_view && ref_of[e->scene[i]] >= 0;
    if (!rc && !nr) rc = er_fail(ER_INPUT, "re-ID: no row has reference view %lld", (long long)ref_view);
    if (!rc && !nq) rc = er_fail(ER_INPUT, "re-ID: no query rows (views other than %lld in a scene with a reference)", (long long)ref_view);
    if (rc) { free(ref_of); return rc; }
    const int D = e->dim;
    float *rx = xmalloc((size_t)nr * D * sizeof *rx), *qx = xmalloc((size_t)nq * D * sizeof *qx);
    int64_t *rid = xmalloc((size_t)nr * sizeof *rid), *qid = xmalloc((size_t)nq * sizeof *qid);
    reid_gt *gt = xmalloc((size_t)nq * sizeof *gt);
    int a = 0, b = 0;
    for (int i = 0; i < e->n; i++) {
        if (e->scene[i] < 0 || ref_of[e->scene[i]] < 0) continue;
        if (e->view[i] == ref_view) {
            memcpy(rx + (size_t)a * D, e->x + (size_t)i * D, D * sizeof(float));
            rid[a++] = e->ids[i];
        } else {
            memcpy(qx + (size_t)b * D, e->x + (size_t)i * D, D * sizeof(float));
            qid[b] = e->ids[i];
            gt[b] = (reid_gt){e->ids[i], e->ids[ref_of[e->scene[i]]]};
            b++;
        }
    }
    int kk = k < nr ? k : nr;
    int64_t *nid = xmalloc((size_t)nq * kk * sizeof *nid);
    float *nd = xmalloc((size_t)nq * kk * sizeof *nd);
    int *cnt = xmalloc((size_t)nq * sizeof *cnt);
    reid_pred *pred = xmalloc((size_t)nq * kk * sizeof *pred);
    findex fx;
    rc = findex_build(&fx, D, rx, rid, nr);
    if (!rc) {
        findex_search(&fx, qx, nq, kk, nid, nd, cnt);
        findex_free(&fx);
        int64_t np = 0;
        for (int q = 0; q < nq; q++)
            for (int j = 0; j < cnt[q]; j++) /* 1 - cos -> ISC score -|q - r|^2 = -2 (1 - cos) */
                pred[np++] = (reid_pred){qid[q], nid[(size_t)q * kk + j], -2.0 * nd[(size_t)q * kk + j]};
        rc = reid_metrics(pred, np, gt, nq, &out->r);
        out->nqueries = nq;
        out->nrefs = nr;
    }
    free(ref_of); free(rx); free(qx); free(rid); free(qid); free(gt); free(nid); free(nd); free(cnt); free(pred);
    return rc;
}
