/* metrics_class.c — ranked-list AP / Recall@k, confusion matrix, accuracy, F1, ROC AUC, CV folds. */
#include "infer/eval/metrics.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ap_ranked(const uint8_t *rel, int n, int64_t nrel, int cutoff) {
    if (nrel <= 0) return NAN;
    int lim = cutoff > 0 && cutoff < n ? cutoff : n;
    double sum = 0;
    int64_t hits = 0;
    for (int r = 0; r < lim; r++)
        if (rel[r]) { hits++; sum += (double)hits / (double)(r + 1); }
    double den = cutoff > 0 && cutoff < nrel ? cutoff : (double)nrel;
    return sum / den;
}

int hit_at_k(const uint8_t *rel, int n, int k) {
    for (int r = 0; r < k && r < n; r++)
        if (rel[r]) return 1;
    return 0;
}

void confusion_matrix(const int *truth, const int *pred, int n, int nclass, int64_t *conf) {
    memset(conf, 0, (size_t)nclass * nclass * sizeof *conf);
    for (int i = 0; i < n; i++)
        if (truth[i] >= 0 && truth[i] < nclass && pred[i] >= 0 && pred[i] < nclass) conf[truth[i] * nclass + pred[i]]++;
}

double accuracy_from_confusion(const int64_t *conf, int nclass) {
    int64_t ok = 0, all = 0;
    for (int i = 0; i < nclass; i++)
        for (int j = 0; j < nclass; j++) { all += conf[i * nclass + j]; if (i == j) ok += conf[i * nclass + j]; }
    return all ? (double)ok / (double)all : NAN;
}

double sensitivity_from_confusion(const int64_t *conf, int nclass, int c) {
    int64_t n = 0;
    for (int b = 0; b < nclass; b++) n += conf[(size_t)c * nclass + b];
    return n ? (double)conf[(size_t)c * nclass + c] / n : NAN;
}

static double f1_class(const int64_t *conf, int nclass, int c) {
    int64_t tp = conf[c * nclass + c], fp = 0, fn = 0;
    for (int i = 0; i < nclass; i++)
        if (i != c) { fp += conf[i * nclass + c]; fn += conf[c * nclass + i]; }
    return 2 * tp + fp + fn ? 2.0 * (double)tp / (double)(2 * tp + fp + fn) : 0.0;
}

double f1_from_confusion(const int64_t *conf, int nclass, int pos) {
    if (pos >= 0) return f1_class(conf, nclass, pos);
    double s = 0;
    for (int c = 0; c < nclass; c++) s += f1_class(conf, nclass, c);
    return nclass ? s / nclass : NAN;
}

typedef struct { double s; int t; } st_pair;
static int cmp_st(const void *a, const void *b) {
    double x = ((const st_pair *)a)->s, y = ((const st_pair *)b)->s;
    return (x > y) - (x < y);
}

double roc_auc(const double *score, const int *truth, int n) {
    st_pair *v = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (truth[i] == 0 || truth[i] == 1) { v[m].s = score[i]; v[m].t = truth[i]; m++; }
    qsort(v, (size_t)m, sizeof *v, cmp_st);
    double rank_sum = 0;
    int64_t npos = 0;
    for (int i = 0, j; i < m; i = j) {
        for (j = i; j < m && v[j].s == v[i].s; j++) {}
        double mid = (i + 1 + j) / 2.0; /* average of ranks i+1 .. j */
        for (int a = i; a < j; a++)
            if (v[a].t) { rank_sum += mid; npos++; }
    }
    free(v);
    int64_t nneg = m - npos;
    if (!npos || !nneg) return NAN;
    return (rank_sum - (double)npos * (npos + 1) / 2.0) / ((double)npos * (double)nneg);
}

void folds_stratified(const int *label, int n, int k, uint64_t seed, int *fold) {
    int maxl = -1;
    for (int i = 0; i < n; i++) if (label[i] > maxl) maxl = label[i];
    int *idx = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    rng_t r = rng_make(seed, rng_stream(RNG_SHUFFLE, 0xf01d, 0));
    int next = 0; /* continue dealing where the previous stratum stopped: balances fold sizes */
    for (int c = -1; c <= maxl; c++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if ((label[i] < 0 ? -1 : label[i]) == c) idx[m++] = i;
        rng_shuffle(&r, idx, m);
        for (int j = 0; j < m; j++) { fold[idx[j]] = next; next = (next + 1) % k; }
    }
    free(idx);
}

typedef struct { int g, size, order; } grp;
static int cmp_grp(const void *a, const void *b) {
    const grp *x = a, *y = b;
    if (x->size != y->size) return y->size - x->size;
    return x->order - y->order;
}

int folds_grouped(const int *group, int n, int k, uint64_t seed, int *fold) {
    int maxg = -1;
    for (int i = 0; i < n; i++) if (group[i] > maxg) maxg = group[i];
    int ng = maxg + 2; /* slot 0 = unknown group (-1): each such item is its own group */
    int *size = xcalloc((size_t)ng, sizeof *size);
    int groups = 0;
    for (int i = 0; i < n; i++) {
        if (group[i] >= 0) groups += !size[group[i] + 1]++;
        else groups++;
    }
    if (groups < k) {
        free(size);
        return er_fail(ER_INPUT, "grouped k-fold: only %d groups for k=%d folds", groups, k);
    }
    int *perm = xmalloc((size_t)ng * sizeof *perm);
    for (int g = 0; g < ng; g++) perm[g] = g;
    rng_t r = rng_make(seed, rng_stream(RNG_SHUFFLE, 0x9f01, 0));
    rng_shuffle(&r, perm, ng);
    grp *gs = xmalloc((size_t)ng * sizeof *gs);
    for (int g = 0; g < ng; g++) { gs[g].g = g; gs[g].size = size[g]; gs[g].order = perm[g]; }
    qsort(gs, (size_t)ng, sizeof *gs, cmp_grp);
    int64_t *load = xcalloc((size_t)k, sizeof *load);
    int *gfold = xcalloc((size_t)ng, sizeof *gfold);
    for (int a = 0; a < ng; a++) {
        if (!gs[a].size) continue;
        int best = 0;
        for (int f = 1; f < k; f++) if (load[f] < load[best]) best = f;
        gfold[gs[a].g] = best;
        load[best] += gs[a].size;
    }
    for (int i = 0; i < n; i++) {
        if (group[i] >= 0) fold[i] = gfold[group[i] + 1];
        else {
            int best = 0;
            for (int f = 1; f < k; f++) if (load[f] < load[best]) best = f;
            fold[i] = best;
            load[best]++;
        }
    }
    free(size); free(perm); free(gs); free(load); free(gfold);
    return ER_OK;
}
