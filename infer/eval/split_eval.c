/* split_eval.c — train / test kNN, few-label subsets, alignment and uniformity (split_eval.h). */
#include "infer/eval/split_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/retrieval/knn.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"

/* Unit-norm copy of n rows. */
static float *unit_rows(const float *x, int n, int dim) {
    float *u = xmalloc((size_t)(n ? n : 1) * dim * sizeof(float));
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int d = 0; d < dim; d++) s += (double)x[(size_t)i * dim + d] * x[(size_t)i * dim + d];
        double inv = s > 0 ? 1.0 / sqrt(s) : 0;
        for (int d = 0; d < dim; d++) u[(size_t)i * dim + d] = (float)(x[(size_t)i * dim + d] * inv);
    }
    return u;
}

int knn_split(const float *bank, const int *bank_label, int nb, const float *q, int nq, int dim, int nclass, int k,
              int weighted, double tau, int *pred) {
    if (k < 1) return er_fail(ER_INPUT, "kNN: k must be >= 1 (got %d)", k);
    if (nb < 1) return er_fail(ER_INPUT, "kNN: the bank is empty");
    if (weighted && !(tau > 0)) return er_fail(ER_INPUT, "kNN: tau must be > 0");
    if (k > nb) k = nb;
    knn_cv_cfg cfg = {.k = k, .weighted = weighted, .tau = tau}; /* bits 0: exact float cosine (findex) */
    int64_t *idx = xmalloc((size_t)(nq ? nq : 1) * k * sizeof(int64_t)), *lab = xmalloc((size_t)k * sizeof(int64_t));
    double *sim = xmalloc((size_t)(nq ? nq : 1) * k * sizeof(double)), *score = xmalloc((size_t)(nclass ? nclass : 1) * sizeof(double));
    int *count = xmalloc((size_t)(nq ? nq : 1) * sizeof(int));
    int rc = knn_neighbours(bank, nb, q, nq, dim, &cfg, idx, sim, count);
    for (int i = 0; i < nq && !rc; i++) {
        for (int t = 0; t < count[i]; t++) lab[t] = bank_label[idx[(size_t)i * k + t]];
        pred[i] = weighted ? knn_weighted(lab, sim + (size_t)i * k, count[i], nclass, tau, score)
                           : knn_majority(lab, count[i], nclass, score);
    }
    free(idx); free(lab); free(sim); free(score); free(count);
    return rc;
}

int knn_split_accuracy(const float *bank, const int *bank_label, int nb, const float *q, const int *q_label, int nq,
                       int dim, int nclass, int k, int weighted, double tau, double *acc) {
    int *pred = xmalloc((size_t)(nq > 0 ? nq : 1) * sizeof(int)), right = 0;
    int rc = knn_split(bank, bank_label, nb, q, nq, dim, nclass, k, weighted, tau, pred);
    for (int i = 0; i < nq && !rc; i++) right += pred[i] == q_label[i];
    *acc = (double)right / nq;
    free(pred);
    return rc;
}

int label_subset(const int *label, int n, double percent, uint64_t seed, uint8_t *keep) {
    memset(keep, 0, (size_t)n);
    int C = 0, kept = 0;
    for (int i = 0; i < n; i++) C = label[i] + 1 > C ? label[i] + 1 : C;
    int *rows = xmalloc((size_t)(n ? n : 1) * sizeof(int));
    for (int c = 0; c < C; c++) {
        int m = 0;
        for (int i = 0; i < n; i++) if (label[i] == c) rows[m++] = i;
        if (!m) continue;
        rng_t r = rng_make(seed, rng_stream(RNG_SAMPLING, 0x1abe1u, (uint32_t)c));
        rng_shuffle(&r, rows, m);
        int take = (int)ceil(m * percent / 100.0 - 1e-9);
        take = take < 1 ? 1 : take > m ? m : take;
        for (int t = 0; t < take; t++) keep[rows[t]] = 1;
        kept += take;
    }
    free(rows);
    return kept;
}

void align_uniform(const float *x, int n, int dim, const int *group, double *align, double *uniform, int64_t *npos) {
    float *u = unit_rows(x, n, dim);
    double sa = 0, su = 0;
    int64_t na = 0, nu = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : sa, su, na, nu)
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double d2 = 0;
            for (int d = 0; d < dim; d++) {
                double t = (double)u[(size_t)i * dim + d] - u[(size_t)j * dim + d];
                d2 += t * t;
            }
            su += exp(-2.0 * d2), nu++;
            if (group && group[i] >= 0 && group[i] == group[j]) sa += d2, na++;
        }
    free(u);
    *align = na ? sa / (double)na : NAN;
    *uniform = nu ? log(su / (double)nu) : NAN;
    *npos = na;
}
