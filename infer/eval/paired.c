/* paired.c — see paired.h. */
#include "infer/eval/paired.h"
#include "infer/eval/bootstrap.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double mcnemar_exact_p(int b, int c) {
    int n = b + c, m = b < c ? b : c;
    if (n == 0) return 1.0;
    double cdf = 0; /* P[Bin(n, 1/2) <= m], terms in log space so large n do not overflow */
    for (int i = 0; i <= m; i++) cdf += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
    double p = 2 * cdf;
    return p < 1 ? p : 1;
}

double paired_bootstrap_p(const double *d, int m) {
    if (m < 1) return NAN;
    int le = 0, ge = 0;
    for (int i = 0; i < m; i++) le += d[i] <= 0, ge += d[i] >= 0;
    double p = 2.0 * (le < ge ? le : ge) / m;
    return p < 1 ? p : 1;
}

static int cmp_gt(const void *a, const void *b) {
    const reid_gt *x = a, *y = b;
    if (x->q != y->q) return x->q < y->q ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void reid_top1_hits(const reid_pred *p, int64_t np, const reid_gt *gt, int64_t ngt, uint8_t *hit) {
    reid_queries q; /* predictions grouped by query, so each pair scans its own query only */
    reid_group_queries(p, np, gt, ngt, &q);
    for (int64_t t = 0; t < ngt; t++) {
        const int64_t *at = bsearch(&gt[t].q, q.qid, (size_t)q.nq, sizeof *q.qid, cmp_i64);
        int64_t a = q.pstart[at - q.qid], b = q.pstart[at - q.qid + 1], ge = 0;
        double s = NAN;
        for (int64_t i = a; i < b; i++) if (q.p[i].r == gt[t].r) s = q.p[i].score;
        if (s == s) for (int64_t i = a; i < b; i++) ge += q.p[i].score >= s;
        hit[t] = ge == 1;
    }
    reid_queries_free(&q);
}

static int same_truth(const reid_gt *a, int64_t na, const reid_gt *b, int64_t nb) {
    if (na != nb) return 0;
    reid_gt *x = xmalloc(sizeof *x * (size_t)(na + 1)), *y = xmalloc(sizeof *y * (size_t)(nb + 1));
    memcpy(x, a, sizeof *x * (size_t)na);
    memcpy(y, b, sizeof *y * (size_t)nb);
    qsort(x, (size_t)na, sizeof *x, cmp_gt);
    qsort(y, (size_t)nb, sizeof *y, cmp_gt);
    int same = !memcmp(x, y, sizeof *x * (size_t)na);
    free(x);
    free(y);
    return same;
}

int reid_paired_test(const reid_pred *pa, int64_t npa, const reid_pred *pb, int64_t npb, const reid_gt *gt_a,
                     int64_t ngt_a, const reid_gt *gt_b, int64_t ngt_b, int B, uint64_t seed, reid_paired *out) {
    memset(out, 0, sizeof *out);
    if (!same_truth(gt_a, ngt_a, gt_b, ngt_b))
        return er_fail(ER_INPUT, "paired test: the two evaluations have different queries or true references (%lld vs %lld pairs)",
                       (long long)ngt_a, (long long)ngt_b);
    reid_result ra, rb;
    int rc = reid_metrics(pa, npa, gt_a, ngt_a, &ra);
    if (!rc) rc = reid_metrics(pb, npb, gt_b, ngt_b, &rb);
    if (rc) return rc;
    out->uap_a = ra.uap, out->uap_b = rb.uap, out->acc1_a = ra.acc1, out->acc1_b = rb.acc1;
    /* McNemar on the rank-1 hits, pair by pair (gt_b sorted like gt_a) */
    reid_gt *ga = xmalloc(sizeof *ga * (size_t)ngt_a);
    memcpy(ga, gt_a, sizeof *ga * (size_t)ngt_a);
    qsort(ga, (size_t)ngt_a, sizeof *ga, cmp_gt);
    uint8_t *ha = xmalloc((size_t)ngt_a), *hb = xmalloc((size_t)ngt_a);
    reid_top1_hits(pa, npa, ga, ngt_a, ha);
    reid_top1_hits(pb, npb, ga, ngt_a, hb);
    for (int64_t t = 0; t < ngt_a; t++) {
        out->a_only += ha[t] && !hb[t];
        out->b_only += !ha[t] && hb[t];
        out->both += ha[t] && hb[t];
        out->neither += !ha[t] && !hb[t];
    }
    out->p_mcnemar = mcnemar_exact_p(out->a_only, out->b_only);
    free(ha); free(hb); free(ga);
    /* paired bootstrap of the uAP difference: one draw of queries, both encoders */
    reid_queries qa, qb;
    reid_group_queries(pa, npa, gt_a, ngt_a, &qa);
    reid_group_queries(pb, npb, gt_b, ngt_b, &qb);
    out->nq = qa.nq;
    out->delta_lo = out->delta_hi = out->p_uap = NAN;
    if (qa.nq != qb.nq || memcmp(qa.qid, qb.qid, sizeof(int64_t) * (size_t)qa.nq)) {
        reid_queries_free(&qa); reid_queries_free(&qb);
        return er_fail(ER_INPUT, "paired test: the two evaluations rank different query sets");
    }
    double *d = xmalloc(sizeof *d * (size_t)(B > 0 ? B : 1));
    int *draw = xmalloc(sizeof *draw * (size_t)(qa.nq ? qa.nq : 1)), m = 0;
    rng_t r = rng_make(seed, 0xb0075);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < qa.nq; t++) draw[t] = (int)rng_below(&r, (uint32_t)qa.nq);
        reid_result xa, xb;
        if (reid_metrics_of_draw(&qa, draw, qa.nq, &xa) || reid_metrics_of_draw(&qb, draw, qb.nq, &xb)) continue;
        d[m++] = xa.uap - xb.uap;
    }
    if (m) {
        out->p_uap = paired_bootstrap_p(d, m);
        out->delta_lo = percentile_linear(d, m, 2.5);
        out->delta_hi = percentile_linear(d, m, 97.5);
    }
    out->replicates = m;
    free(d); free(draw);
    reid_queries_free(&qa); reid_queries_free(&qb);
    return ER_OK;
}
