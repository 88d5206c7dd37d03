/* probe_cv.c — k-fold cross-validation of a linear probe (probe_cv.h). */
#include "infer/eval/probe_cv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/eval/metrics.h"
#include "nn/base/base.h"

enum { PROBE_ITERS = 300 };
static const double PROBE_LR = 0.05;

/* softmax of the logits of row x into p (nclass), returns log-sum-exp */
static double row_softmax(const float *x, int dim, int C, const double *W, const double *b, double *p) {
    double mx = -INFINITY;
    for (int c = 0; c < C; c++) {
        double z = b[c];
        const double *w = W + (size_t)c * dim;
        for (int j = 0; j < dim; j++) z += w[j] * x[j];
        p[c] = z;
        if (z > mx) mx = z;
    }
    double s = 0;
    for (int c = 0; c < C; c++) s += exp(p[c] - mx);
    for (int c = 0; c < C; c++) p[c] = exp(p[c] - mx) / s;
    return mx + log(s);
}

double probe_loss(const float *x, const int *label, int n, int dim, int C, const double *W, const double *b, double l2,
                  double *gW, double *gb) {
    double loss = 0, *p = xmalloc((size_t)C * sizeof(double));
    int used = 0;
    if (gW) memset(gW, 0, (size_t)C * dim * sizeof(double));
    if (gb) memset(gb, 0, (size_t)C * sizeof(double));
    for (int i = 0; i < n; i++) {
        if (label[i] < 0) continue;
        const float *xi = x + (size_t)i * dim;
        double lse = row_softmax(xi, dim, C, W, b, p), zy = b[label[i]];
        for (int j = 0; j < dim; j++) zy += W[(size_t)label[i] * dim + j] * xi[j];
        loss += lse - zy;
        used++;
        if (!gW) continue;
        for (int c = 0; c < C; c++) {
            double d = p[c] - (c == label[i]);
            gb[c] += d;
            double *g = gW + (size_t)c * dim;
            for (int j = 0; j < dim; j++) g[j] += d * xi[j];
        }
    }
    free(p);
    double inv = used ? 1.0 / used : 0, reg = 0;
    for (size_t k = 0; k < (size_t)C * dim; k++) reg += W[k] * W[k];
    if (gW) {
        for (size_t k = 0; k < (size_t)C * dim; k++) gW[k] = gW[k] * inv + l2 * W[k];
        for (int c = 0; c < C; c++) gb[c] *= inv;
    }
    return loss * inv + 0.5 * l2 * reg;
}

/* Adam on (W, b) from zero over the rows of x */
static void probe_fit(const float *x, const int *label, int n, int dim, int C, double l2, double *W, double *b) {
    size_t nw = (size_t)C * dim + C;
    double *g = xcalloc(nw, sizeof(double)), *m = xcalloc(nw, sizeof(double)), *v = xcalloc(nw, sizeof(double));
    double *theta = xcalloc(nw, sizeof(double)); /* W then b */
    for (int t = 1; t <= PROBE_ITERS; t++) {
        probe_loss(x, label, n, dim, C, theta, theta + (size_t)C * dim, l2, g, g + (size_t)C * dim);
        double c1 = 1 - pow(0.9, t), c2 = 1 - pow(0.999, t);
        for (size_t k = 0; k < nw; k++) {
            m[k] = 0.9 * m[k] + 0.1 * g[k];
            v[k] = 0.999 * v[k] + 0.001 * g[k] * g[k];
            theta[k] -= PROBE_LR * (m[k] / c1) / (sqrt(v[k] / c2) + 1e-8);
        }
    }
    memcpy(W, theta, (size_t)C * dim * sizeof(double));
    memcpy(b, theta + (size_t)C * dim, (size_t)C * sizeof(double));
    free(g); free(m); free(v); free(theta);
}

/* Standardise with the training rows' statistics, fit, predict the test rows. tr and te are
 * overwritten with their standardised values. */
static void fit_predict(float *tr, const int *ytr, int ntr, float *te, int nte, int dim, int C, double l2, int *pred,
                        double *score) {
    double *mu = xmalloc((size_t)dim * sizeof(double)), *sd = xmalloc((size_t)dim * sizeof(double));
    double *W = xmalloc((size_t)C * dim * sizeof(double)), *b = xmalloc((size_t)C * sizeof(double));
    double *p = xmalloc((size_t)C * sizeof(double));
    for (int j = 0; j < dim; j++) { /* the training rows' statistics, applied to both */
        double s = 0, s2 = 0;
        for (int i = 0; i < ntr; i++) s += tr[(size_t)i * dim + j];
        mu[j] = s / ntr;
        for (int i = 0; i < ntr; i++) { double d = tr[(size_t)i * dim + j] - mu[j]; s2 += d * d; }
        sd[j] = sqrt(s2 / ntr);
        if (sd[j] < 1e-12) sd[j] = 1;
        for (int i = 0; i < ntr; i++) tr[(size_t)i * dim + j] = (float)((tr[(size_t)i * dim + j] - mu[j]) / sd[j]);
        for (int i = 0; i < nte; i++) te[(size_t)i * dim + j] = (float)((te[(size_t)i * dim + j] - mu[j]) / sd[j]);
    }
    probe_fit(tr, ytr, ntr, dim, C, l2, W, b);
    for (int a = 0; a < nte; a++) {
        double *pa = score ? score + (size_t)a * C : p;
        row_softmax(te + (size_t)a * dim, dim, C, W, b, pa);
        int best = 0;
        for (int c = 1; c < C; c++) if (pa[c] > pa[best]) best = c;
        pred[a] = best;
    }
    free(mu); free(sd); free(W); free(b); free(p);
}

int probe_split(const float *tr, const int *ytr, int ntr, const float *te, int nte, int dim, int C, double l2,
                int *pred, double *score) {
    if (!(l2 >= 0)) return er_fail(ER_INPUT, "linear probe: L2 weight must be >= 0");
    float *a = xmalloc((size_t)(ntr ? ntr : 1) * dim * sizeof(float)), *b = xmalloc((size_t)(nte ? nte : 1) * dim * sizeof(float));
    int *y = xmalloc((size_t)(ntr ? ntr : 1) * sizeof(int)), m = 0;
    for (int i = 0; i < ntr; i++)
        if (ytr[i] >= 0) { memcpy(a + (size_t)m * dim, tr + (size_t)i * dim, dim * sizeof(float)); y[m++] = ytr[i]; }
    memcpy(b, te, (size_t)nte * dim * sizeof(float));
    int rc = ER_OK;
    if (!m) rc = er_fail(ER_INPUT, "linear probe: no labelled training rows");
    else fit_predict(a, y, m, b, nte, dim, C, l2, pred, score);
    free(a); free(b); free(y);
    return rc;
}

int probe_cv(const float *x, int n, int dim, const int *label, const int *group, int C, int folds, uint64_t seed,
             double l2, int *pred, double *score, int *fold) {
    if (folds < 2) return er_fail(ER_INPUT, "cross-validation needs at least 2 folds (got %d)", folds);
    if (folds > n) return er_fail(ER_INPUT, "cross-validation: %d folds for %d items", folds, n);
    if (!(l2 >= 0)) return er_fail(ER_INPUT, "linear probe: L2 weight must be >= 0");
    if (group) {
        int rc = folds_grouped(group, n, folds, seed, fold);
        if (rc) return rc;
    } else folds_stratified(label, n, folds, seed, fold);
    float *tr = xmalloc((size_t)n * dim * sizeof(float)), *te = xmalloc((size_t)n * dim * sizeof(float));
    int *ytr = xmalloc((size_t)n * sizeof(int)), *row = xmalloc((size_t)n * sizeof(int));
    int *pf = xmalloc((size_t)n * sizeof(int));
    double *sf = xmalloc((size_t)n * C * sizeof(double));
    for (int f = 0; f < folds; f++) {
        int ntr = 0, nte = 0;
        for (int i = 0; i < n; i++) {
            if (fold[i] == f) { memcpy(te + (size_t)nte * dim, x + (size_t)i * dim, dim * sizeof(float)); row[nte++] = i; }
            else if (label[i] >= 0) { memcpy(tr + (size_t)ntr * dim, x + (size_t)i * dim, dim * sizeof(float)); ytr[ntr++] = label[i]; }
        }
        if (!nte || !ntr) continue;
        fit_predict(tr, ytr, ntr, te, nte, dim, C, l2, pf, sf);
        for (int a = 0; a < nte; a++) {
            pred[row[a]] = pf[a];
            memcpy(score + (size_t)row[a] * C, sf + (size_t)a * C, C * sizeof(double));
        }
    }
    free(tr); free(te); free(ytr); free(row); free(pf); free(sf);
    return ER_OK;
}
