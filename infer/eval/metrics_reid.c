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

