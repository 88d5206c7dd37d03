/* bootstrap.c — see bootstrap.h. */
#include "infer/eval/bootstrap.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double percentile_linear(double *v, int n, double q) {
    if (n < 1) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = q / 100.0 * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static int pred_by_q(const void *a, const void *b) { return cmp_i64(&((const reid_pred *)a)->q, &((const reid_pred *)b)->q); }
static int gt_by_q(const void *a, const void *b) { return cmp_i64(&((const reid_gt *)a)->q, &((const reid_gt *)b)->q); }

void reid_group_queries(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, reid_queries *out) {
    memset(out, 0, sizeof *out);
    int64_t *ids = xmalloc(sizeof *ids * (size_t)(np + ngt + 1));
    for (int64_t i = 0; i < np; i++) ids[i] = p[i].q;
    for (int64_t i = 0; i < ngt; i++) ids[np + i] = gt[i].q;
    qsort(ids, (size_t)(np + ngt), sizeof *ids, cmp_i64);
    int64_t u = 0;
    for (int64_t i = 0; i < np + ngt; i++) if (!u || ids[u - 1] != ids[i]) ids[u++] = ids[i];
    out->nq = (int)u;
    out->qid = ids;
    out->p = xmalloc(sizeof *out->p * (size_t)(np + 1));
    out->gt = xmalloc(sizeof *out->gt * (size_t)(ngt + 1));
    memcpy(out->p, p, sizeof *p * (size_t)np);
    memcpy(out->gt, gt, sizeof *gt * (size_t)ngt);
    qsort(out->p, (size_t)np, sizeof *p, pred_by_q);
    qsort(out->gt, (size_t)ngt, sizeof *gt, gt_by_q);
    out->pstart = xmalloc(sizeof(int64_t) * (size_t)(u + 1));
    out->gstart = xmalloc(sizeof(int64_t) * (size_t)(u + 1));
    int64_t a = 0, b = 0;
    for (int64_t t = 0; t < u; t++) { /* both arrays are sorted by query like ids */
        out->pstart[t] = a;
        out->gstart[t] = b;
        while (a < np && out->p[a].q == ids[t]) a++;
        while (b < ngt && out->gt[b].q == ids[t]) b++;
    }
    out->pstart[u] = np;
    out->gstart[u] = ngt;
}

void reid_queries_free(reid_queries *q) {
    free(q->p); free(q->pstart); free(q->gt); free(q->gstart); free(q->qid);
    memset(q, 0, sizeof *q);
}

int reid_metrics_of_draw(const reid_queries *q, const int *draw, int n, reid_result *out) {
    int64_t np = 0, ng = 0;
    for (int t = 0; t < n; t++) {
        np += q->pstart[draw[t] + 1] - q->pstart[draw[t]];
        ng += q->gstart[draw[t] + 1] - q->gstart[draw[t]];
    }
    if (!ng) { memset(out, 0, sizeof *out); return ER_INPUT; } /* a resample without a true pair: no metric */
    reid_pred *p = xmalloc(sizeof *p * (size_t)(np + 1));
    reid_gt *g = xmalloc(sizeof *g * (size_t)ng);
    np = ng = 0;
    for (int t = 0; t < n; t++) {
        int s = draw[t];
        for (int64_t i = q->pstart[s]; i < q->pstart[s + 1]; i++) p[np] = q->p[i], p[np++].q = t;
        for (int64_t i = q->gstart[s]; i < q->gstart[s + 1]; i++) g[ng] = q->gt[i], g[ng++].q = t;
    }
    int rc = reid_metrics(p, np, g, ng, out);
    free(p);
    free(g);
    return rc;
}

int reid_bootstrap(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, int B, uint64_t seed, reid_interval *out) {
    memset(out, 0, sizeof *out);
    out->lo.uap = out->lo.acc1 = out->lo.recall_p90 = NAN;
    out->hi = out->lo;
    if (B < 1) return ER_OK;
    reid_queries q;
    reid_group_queries(p, np, gt, ngt, &q);
    double *v = xmalloc(sizeof *v * 3 * (size_t)B);
    const size_t nq1 = q.nq ? (size_t)q.nq : 1;
    int *draw = xmalloc(sizeof *draw * nq1 * (size_t)B), m = 0, rc = ER_OK;
    reid_result *res = xmalloc(sizeof *res * (size_t)B);
    char *ok = xmalloc((size_t)B);
    rng_t r = rng_make(seed, 0xb0075);
    /* the draws in sequence (one Philox stream: the same seed, the same interval), the replicates
     * on every thread: the same intervals as one thread, in a fraction of the time (a sweep runs
     * one per hash length and k) */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < q.nq; t++) draw[(size_t)b * nq1 + t] = (int)rng_below(&r, (uint32_t)q.nq);
#pragma omp parallel for schedule(dynamic, 4)
    for (int b = 0; b < B; b++) /* no true pair drawn: the replicate has no metric */
        ok[b] = reid_metrics_of_draw(&q, draw + (size_t)b * nq1, q.nq, &res[b]) == ER_OK;
    for (int b = 0; b < B; b++) {
        if (!ok[b]) continue;
        v[m] = res[b].uap, v[B + m] = res[b].acc1, v[2 * B + m] = res[b].recall_p90;
        m++;
    }
    free(res);
    free(ok);
    if (m) {
        out->lo.uap = percentile_linear(v, m, 2.5), out->hi.uap = percentile_linear(v, m, 97.5);
        out->lo.acc1 = percentile_linear(v + B, m, 2.5), out->hi.acc1 = percentile_linear(v + B, m, 97.5);
        out->lo.recall_p90 = percentile_linear(v + 2 * B, m, 2.5), out->hi.recall_p90 = percentile_linear(v + 2 * B, m, 97.5);
    }
    out->replicates = m;
    free(v);
    free(draw);
    reid_queries_free(&q);
    return rc;
}

void bootstrap_mean_interval(const double *v, int n, int B, uint64_t seed, double *lo, double *hi) {
    *lo = *hi = NAN;
    if (B < 1 || n < 1) return;
    double *m = xmalloc(sizeof *m * (size_t)B);
    rng_t r = rng_make(seed, 0xb0075);
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int t = 0; t < n; t++) s += v[rng_below(&r, (uint32_t)n)];
        m[b] = s / n;
    }
    *lo = percentile_linear(m, B, 2.5);
    *hi = percentile_linear(m, B, 97.5);
    free(m);
}
