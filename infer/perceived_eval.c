/* perceived_eval.c — distances, Likert-level histograms, Bhattacharyya, sparse recall. */
#include "infer/perceived_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base.h"

int pdist_parse(const char *s, pdist_kind *k) {
    if (!strcmp(s, "cosine")) *k = PD_COSINE;
    else if (!strcmp(s, "hamming")) *k = PD_HAMMING;
    else if (!strcmp(s, "chi2")) *k = PD_CHI2;
    else return er_fail(ER_INPUT, "--distance: '%s' is not one of cosine, hamming, chi2", s);
    return ER_OK;
}

const char *pdist_name(pdist_kind k) { return k == PD_COSINE ? "cosine" : k == PD_HAMMING ? "hamming" : "chi2"; }

int pdist_prepare(pdist_set *p, const float *x, int n, int dim, pdist_kind kind) {
    p->kind = kind; p->n = n; p->dim = dim;
    p->x = xmalloc((size_t)(n ? n : 1) * dim * sizeof(float));
    for (int i = 0; i < n; i++) {
        const float *r = x + (size_t)i * dim;
        float *o = p->x + (size_t)i * dim;
        if (kind == PD_COSINE) {
            double s = 0;
            for (int k = 0; k < dim; k++) s += (double)r[k] * r[k];
            float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.f;
            for (int k = 0; k < dim; k++) o[k] = r[k] * inv;
        } else if (kind == PD_HAMMING) {
            for (int k = 0; k < dim; k++) o[k] = r[k] > 0 ? 1.f : 0.f;
        } else {
            for (int k = 0; k < dim; k++) {
                if (!(r[k] >= 0)) {
                    free(p->x); p->x = NULL;
                    return er_fail(ER_INPUT, "chi2 distance: row %d, component %d is %g (chi2 needs histograms >= 0)", i, k, r[k]);
                }
                o[k] = r[k];
            }
        }
    }
    return ER_OK;
}

double pdist_ij(const pdist_set *p, int i, int j) {
    const float *a = p->x + (size_t)i * p->dim, *b = p->x + (size_t)j * p->dim;
    double s = 0;
    switch (p->kind) {
    case PD_COSINE:
        for (int k = 0; k < p->dim; k++) s += (double)a[k] * b[k];
        return 1.0 - s;
    case PD_HAMMING:
        for (int k = 0; k < p->dim; k++) s += a[k] != b[k];
        return s;
    case PD_CHI2:
        for (int k = 0; k < p->dim; k++) {
            double t = (double)a[k] + b[k];
            if (t > 0) { double d = (double)a[k] - b[k]; s += d * d / t; }
        }
        return s;
    }
    return NAN;
}

void pdist_free(pdist_set *p) { free(p->x); p->x = NULL; }

void likert_level_hist(const likert_gt *gt, const double *pair_dist, int nbins, double *lo, double *hi, double *counts) {
    if (!(*lo < *hi)) {
        double a = INFINITY, b = -INFINITY;
        for (int k = 0; k < gt->npairs; k++) { if (pair_dist[k] < a) a = pair_dist[k]; if (pair_dist[k] > b) b = pair_dist[k]; }
        if (!(a < b)) { a = a == INFINITY ? 0 : a - 0.5; b = a + 1; }
        *lo = a; *hi = b;
    }
    memset(counts, 0, 4 * nbins * sizeof(double));
    for (int r = 0; r < gt->nrec; r++) {
        int L = likert_level(gt->rec[r].score);
        double d = pair_dist[gt->rec[r].pair];
        int bin = (int)floor((d - *lo) / (*hi - *lo) * nbins);
        if (bin < 0) bin = 0;
        if (bin >= nbins) bin = nbins - 1;
        counts[L * nbins + bin] += 1;
    }
}

double bhattacharyya(const double *p, const double *q, int nbins) {
    double sp = 0, sq = 0, bc = 0;
    for (int i = 0; i < nbins; i++) { sp += p[i]; sq += q[i]; }
    if (sp <= 0 || sq <= 0) return NAN;
    for (int i = 0; i < nbins; i++) bc += sqrt(p[i] / sp * q[i] / sq);
    return bc > 0 ? -log(bc) : INFINITY;
}

/* Position (1-based) of item t among items sorted by distance to q, excluding q and q's group. */
static int rank_of(const pdist_set *p, const int64_t *group, int q, int t) {
    double dt = pdist_ij(p, q, t);
    int r = 1;
    for (int c = 0; c < p->n; c++) {
        if (c == q || c == t) continue;
        if (group && group[c] == group[q] && group[q] >= 0) continue;
        double dc = pdist_ij(p, q, c);
        if (dc < dt || (dc == dt && c < t)) r++;
    }
    return r;
}

void sparse_recall(const likert_gt *gt, const int *ia, const int *ib, const pdist_set *p, const int64_t *group,
                   int kmax, double *recall, int npos[3]) {
    int *has1 = xcalloc(gt->npairs ? gt->npairs : 1, sizeof(int)), *has2 = xcalloc(gt->npairs ? gt->npairs : 1, sizeof(int));
    for (int r = 0; r < gt->nrec; r++) {
        if (gt->rec[r].score == 1) has1[gt->rec[r].pair] = 1;
        if (gt->rec[r].score == 2) has2[gt->rec[r].pair] = 1;
    }
    double *hits = xcalloc(3 * (kmax + 1), sizeof(double));
    npos[0] = npos[1] = npos[2] = 0;
    int *rk = xmalloc((gt->npairs ? gt->npairs : 1) * sizeof(int));
    #pragma omp parallel for schedule(dynamic, 4)
    for (int k = 0; k < gt->npairs; k++) {
        rk[k] = 0;
        if (!has1[k] && !has2[k] && !(gt->pairs[k].score > 0)) continue;
        int ra = rank_of(p, group, ia[k], ib[k]), rb = rank_of(p, group, ib[k], ia[k]);
        rk[k] = ra < rb ? ra : rb;
    }
    for (int k = 0; k < gt->npairs; k++) {
        int in[3] = {has2[k], has1[k], gt->pairs[k].score > 0};
        for (int d = 0; d < 3; d++) {
            if (!in[d]) continue;
            npos[d]++;
            if (rk[k] <= kmax) hits[d * (kmax + 1) + rk[k]] += 1;
        }
    }
    for (int d = 0; d < 3; d++) {
        double c = 0;
        for (int k = 1; k <= kmax; k++) {
            c += hits[d * (kmax + 1) + k];
            recall[d * kmax + k - 1] = npos[d] ? c / npos[d] : NAN;
        }
    }
    free(rk); free(hits); free(has1); free(has2);
}
