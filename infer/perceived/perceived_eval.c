/* perceived_eval.c — distances, Likert-level histograms, Bhattacharyya, sparse recall. */
#include "infer/perceived/perceived_eval.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

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

void sparse_recall(const likert_gt *gt, const int *ia, const int *ib, const pdist_set *p, const int64_t *group,
                   int kmax, double *recall, int npos[3]) {
    const int np = gt->npairs, n = p->n;
    int *has1 = xcalloc(np ? np : 1, sizeof(int)), *has2 = xcalloc(np ? np : 1, sizeof(int));
    for (int r = 0; r < gt->nrec; r++) {
        if (gt->rec[r].score == 1) has1[gt->rec[r].pair] = 1;
        if (gt->rec[r].score == 2) has2[gt->rec[r].pair] = 1;
    }
    double *hits = xcalloc(3 * (kmax + 1), sizeof(double));
    npos[0] = npos[1] = npos[2] = 0;
    /* every positive couple gives two (query, target) entries; group them by query so that each
     * query's distance row is computed once: O(queries * n * dim + entries * n) */
    int *rk = xmalloc((np ? np : 1) * sizeof(int));
    int *start = xcalloc(n + 1, sizeof(int)), *ent = xmalloc((np ? 2 * np : 1) * sizeof(int));
    for (int k = 0; k < np; k++) {
        rk[k] = INT32_MAX;
        if (!has1[k] && !has2[k] && !(gt->pairs[k].score > 0)) continue;
        start[ia[k] + 1]++;
        start[ib[k] + 1]++;
    }
    for (int i = 0; i < n; i++) start[i + 1] += start[i];
    int *fill = xmalloc((n ? n : 1) * sizeof(int));
    memcpy(fill, start, n * sizeof(int));
    for (int k = 0; k < np; k++) {
        if (!has1[k] && !has2[k] && !(gt->pairs[k].score > 0)) continue;
        ent[fill[ia[k]]++] = 2 * k;     /* query a, target b */
        ent[fill[ib[k]]++] = 2 * k + 1; /* query b, target a */
    }
    free(fill);
    int *rank = xmalloc((np ? 2 * np : 1) * sizeof(int));
    #pragma omp parallel if ((double)n * p->dim * start[n] > 1e7)
    {
        double *row = xmalloc((n ? n : 1) * sizeof(double));
        #pragma omp for schedule(dynamic, 8)
        for (int q = 0; q < n; q++) {
            if (start[q] == start[q + 1]) continue;
            for (int c = 0; c < n; c++) row[c] = pdist_ij(p, q, c);
            for (int s = start[q]; s < start[q + 1]; s++) {
                int e = ent[s], k = e / 2, t = e % 2 ? ia[k] : ib[k];
                double dt = row[t];
                int r = 1; /* position of t among candidates: not q, not q's group, ties by index */
                for (int c = 0; c < n; c++) {
                    if (c == q || c == t) continue;
                    if (group && group[q] >= 0 && group[c] == group[q]) continue;
                    if (row[c] < dt || (row[c] == dt && c < t)) r++;
                }
                rank[e] = r;
            }
        }
        free(row);
    }
    for (int k = 0; k < np; k++)
        if (has1[k] || has2[k] || gt->pairs[k].score > 0) rk[k] = rank[2 * k] < rank[2 * k + 1] ? rank[2 * k] : rank[2 * k + 1];
    free(rank); free(start); free(ent);
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

typedef struct { double d; int item, pos; } cand;
static int cmp_cand(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    if (a->d != b->d) return a->d < b->d ? -1 : 1;
    return a->item - b->item;
}

double sparse_recall_scored(const likert_gt *gt, const int *ia, const int *ib, const pdist_set *p, const int64_t *group,
                            int npts, double *curve, int *nq) {
    /* both directions of every couple, grouped by query */
    const int m = 2 * gt->npairs;
    int *q = xmalloc((m ? m : 1) * sizeof(int)), *o = xmalloc((m ? m : 1) * sizeof(int)), *ord = xmalloc((m ? m : 1) * sizeof(int));
    char *pos = xmalloc(m ? m : 1);
    for (int k = 0; k < gt->npairs; k++) {
        q[2 * k] = ia[k]; o[2 * k] = ib[k]; q[2 * k + 1] = ib[k]; o[2 * k + 1] = ia[k];
        pos[2 * k] = pos[2 * k + 1] = gt->pairs[k].score > 0;
    }
    /* counting sort of the entries by query */
    int n = p->n;
    int *start = xcalloc(n + 1, sizeof(int));
    for (int e = 0; e < m; e++) start[q[e] + 1]++;
    for (int i = 0; i < n; i++) start[i + 1] += start[i];
    int *fill = xmalloc((n ? n : 1) * sizeof(int));
    memcpy(fill, start, n * sizeof(int));
    for (int e = 0; e < m; e++) ord[fill[q[e]]++] = e;
    free(fill);
    for (int t = 0; t < npts; t++) curve[t] = 0;
    *nq = 0;
    cand *c = xmalloc((m ? m : 1) * sizeof *c);
    for (int i = 0; i < n; i++) {
        int nc = 0, nr = 0;
        for (int s = start[i]; s < start[i + 1]; s++) {
            int e = ord[s];
            if (group && group[i] >= 0 && group[o[e]] == group[i]) continue;
            c[nc++] = (cand){pdist_ij(p, i, o[e]), o[e], pos[e]};
            nr += pos[e];
        }
        if (nr == 0) continue;
        qsort(c, nc, sizeof *c, cmp_cand);
        for (int t = 0; t < npts; t++) {
            int top = (int)ceil((double)(t + 1) / npts * nc - 1e-9), hit = 0;
            for (int r = 0; r < top && r < nc; r++) hit += c[r].pos;
            curve[t] += (double)hit / nr;
        }
        (*nq)++;
    }
    double auc = 0;
    for (int t = 0; t < npts; t++) {
        curve[t] = *nq ? curve[t] / *nq : NAN;
        auc += curve[t] / npts;
    }
    free(c); free(start); free(q); free(o); free(ord); free(pos);
    return auc;
}
