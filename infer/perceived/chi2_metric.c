/* chi2_metric.c — see chi2_metric.h. */
#include "infer/perceived/chi2_metric.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

void chi2_cfg_default(chi2_cfg *c) {
    c->slope = 1.0; c->gamma = 5.0; c->lambda = 0.0; c->b = 0.0; c->max_iter = 300; c->tol = 1e-7;
}

/* Weighted, re-normalised signature into out[K]; returns the L1 norm before normalisation. */
static double renorm(const float *h, const double *w, int K, double *out) {
    double s = 0;
    for (int k = 0; k < K; k++) { out[k] = w ? w[k] * h[k] : h[k]; s += out[k]; }
    double inv = s > 0 ? 1.0 / s : 0.0;
    for (int k = 0; k < K; k++) out[k] *= inv;
    return s;
}

double chi2_wdist(const float *hi, const float *hj, const double *w, int K) {
    double buf[2 * 512]; /* no allocation per couple for usual vocabulary sizes */
    double *x = K <= 512 ? buf : xmalloc(2 * K * sizeof(double)), *y = x + K;
    renorm(hi, w, K, x);
    renorm(hj, w, K, y);
    double d = 0;
    for (int k = 0; k < K; k++) {
        double t = x[k] + y[k];
        if (t > 0) d += (x[k] - y[k]) * (x[k] - y[k]) / t;
    }
    if (x != buf) free(x);
    return d;
}

/* d/dx_k chi2 = (x_k - y_k)(x_k + 3 y_k) / (x_k + y_k)^2 ; symmetric for y.
 * x_k = w_k h_ik / s_i, so dx_k/dw_l = (h_il / s_i)(delta_kl - x_k) and
 * dd/dw_l = (h_il/s_i)(gx_l - <gx, x>) + (h_jl/s_j)(gy_l - <gy, y>). */
double chi2_wdist_grad(const float *hi, const float *hj, const double *w, int K, double scale, double *grad) {
    double buf[4 * 512];
    double *x = K <= 512 ? buf : xmalloc(4 * K * sizeof(double)), *y = x + K, *gx = y + K, *gy = gx + K;
    double si = renorm(hi, w, K, x), sj = renorm(hj, w, K, y);
    double d = 0, gxx = 0, gyy = 0;
    for (int k = 0; k < K; k++) {
        double t = x[k] + y[k];
        if (t > 0) {
            double u = x[k] - y[k];
            d += u * u / t;
            gx[k] = u * (x[k] + 3 * y[k]) / (t * t);
            gy[k] = -u * (y[k] + 3 * x[k]) / (t * t);
        } else {
            gx[k] = gy[k] = 0;
        }
        gxx += gx[k] * x[k];
        gyy += gy[k] * y[k];
    }
    if (si > 0 && sj > 0)
        for (int l = 0; l < K; l++)
            grad[l] += scale * (hi[l] / si * (gx[l] - gxx) + hj[l] / sj * (gy[l] - gyy));
    if (x != buf) free(x);
    return d;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double chi2_margin(const chi2_pairs *p) {
    double *s = xmalloc((p->np ? p->np : 1) * sizeof(double)), *dd = xmalloc((p->np ? p->np : 1) * sizeof(double));
    int ns = 0, nd = 0;
    for (int q = 0; q < p->np; q++) {
        double d = chi2_wdist(p->h + (size_t)p->ia[q] * p->K, p->h + (size_t)p->ib[q] * p->K, NULL, p->K);
        if (p->sim[q]) s[ns++] = d; else dd[nd++] = d;
    }
    double b = 0.5 * (median(s, ns) + median(dd, nd));
    free(s);
    free(dd);
    return b;
}

/* log(1 + e^-z) and its derivative -1/(1 + e^z), stable for large |z|. */
static double logistic_loss(double z) { return z > 0 ? log1p(exp(-z)) : -z + log1p(exp(z)); }
static double logistic_dloss(double z) { return z > 0 ? -exp(-z) / (1 + exp(-z)) : -1.0 / (1 + exp(z)); }

double chi2_cost(const chi2_pairs *p, const chi2_cfg *c, const double *w, double *grad) {
    int ns = 0, nd = 0;
    for (int q = 0; q < p->np; q++) { if (p->sim[q]) ns++; else nd++; }
    const int K = p->K;
    if (grad) memset(grad, 0, K * sizeof(double));
    double e = 0;
    const int nt = omp_get_max_threads();
    double *gacc = grad ? xcalloc((size_t)K * nt, sizeof(double)) : NULL; /* one gradient per thread */
    #pragma omp parallel for reduction(+ : e) schedule(static) if (p->np > 256)
    for (int q = 0; q < p->np; q++) {
        const float *hi = p->h + (size_t)p->ia[q] * K, *hj = p->h + (size_t)p->ib[q] * K;
        /* S wants d < b, D wants d > b: z = sgn * slope * (b - d) */
        double sgn = p->sim[q] ? 1.0 : -1.0, wt = p->sim[q] ? 1.0 / ns : c->gamma / nd;
        double d = chi2_wdist(hi, hj, w, K), z = sgn * c->slope * (c->b - d);
        if (grad) chi2_wdist_grad(hi, hj, w, K, wt * logistic_dloss(z) * (-sgn * c->slope), gacc + (size_t)omp_get_thread_num() * K);
        e += wt * logistic_loss(z);
    }
    if (grad) {
        for (int t = 0; t < nt; t++)
            for (int k = 0; k < K; k++) grad[k] += gacc[(size_t)t * K + k];
        free(gacc);
    }
    if (c->lambda > 0)
        for (int k = 0; k < K; k++) {
            e += c->lambda * (w[k] - 1) * (w[k] - 1);
            if (grad) grad[k] += 2 * c->lambda * (w[k] - 1);
        }
    return e;
}

int chi2_learn(const chi2_pairs *p, const chi2_cfg *c, double *w, double *e0, double *e1) {
    const int K = p->K;
    double *g = xmalloc(3 * K * sizeof(double)), *wn = g + K, *gn = wn + K;
    double e = chi2_cost(p, c, w, g), step = 1.0;
    *e0 = e;
    int it;
    for (it = 0; it < c->max_iter; it++) {
        double en = e;
        int accepted = 0;
        for (int bt = 0; bt < 40; bt++) {
            double dec = 0;
            for (int k = 0; k < K; k++) {
                wn[k] = w[k] - step * g[k];
                if (wn[k] < 0) wn[k] = 0;
                dec += g[k] * (w[k] - wn[k]);
            }
            en = chi2_cost(p, c, wn, NULL);
            if (en <= e - 1e-4 * dec && dec > 0) { accepted = 1; break; }
            step *= 0.5;
        }
        if (!accepted) break;
        if (c->lambda <= 0) { /* scale-free: keep mean(w) = 1 */
            double s = 0;
            for (int k = 0; k < K; k++) s += wn[k];
            if (s > 0) for (int k = 0; k < K; k++) wn[k] *= K / s;
        }
        memcpy(w, wn, K * sizeof(double));
        double rel = (e - en) / (fabs(e) > 1e-300 ? fabs(e) : 1.0);
        e = chi2_cost(p, c, w, gn);
        memcpy(g, gn, K * sizeof(double));
        step *= 2.0;
        if (rel < c->tol) { it++; break; }
    }
    *e1 = e;
    free(g);
    return it;
}
