/* perceived_stats.c — Pearson / Spearman / Kendall tau-b with jackknife errors; Steiger and MRR. */
#include "infer/perceived/perceived_stats.h"

#include <math.h>
#include <stdlib.h>

#include "nn/base/base.h"

/* ---- Pearson (two-pass, centred) ---- */
double corr_pearson(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double mx = 0, my = 0;
    for (int i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n; my /= n;
    double sxx = 0, syy = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double a = x[i] - mx, b = y[i] - my;
        sxx += a * a; syy += b * b; sxy += a * b;
    }
    if (sxx <= 0 || syy <= 0) return NAN;
    return sxy / sqrt(sxx * syy);
}

/* ---- ranks ---- */
typedef struct { double v; int i; } vi;
static int cmp_vi(const void *pa, const void *pb) {
    const vi *a = pa, *b = pb;
    if (a->v != b->v) return a->v < b->v ? -1 : 1;
    return a->i - b->i;
}
void ranks_average(const double *x, int n, double *rank) {
    vi *t = xmalloc((n ? n : 1) * sizeof *t);
    for (int i = 0; i < n; i++) t[i] = (vi){x[i], i};
    qsort(t, n, sizeof *t, cmp_vi);
    for (int s = 0; s < n;) {
        int e = s;
        while (e + 1 < n && t[e + 1].v == t[s].v) e++;
        double r = 0.5 * (s + e) + 1.0; /* mean of positions s+1..e+1 */
        for (int k = s; k <= e; k++) rank[t[k].i] = r;
        s = e + 1;
    }
    free(t);
}

double corr_spearman(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double *rx = xmalloc(2 * n * sizeof(double)), *ry = rx + n;
    ranks_average(x, n, rx);
    ranks_average(y, n, ry);
    double r = corr_pearson(rx, ry, n);
    free(rx);
    return r;
}

/* ---- Kendall: per-item counts so that leave-one-out is O(1) per item ---- */
static double tau_from(double P, double Q, double T, double U) {
    double den = (P + Q + T) * (P + Q + U);
    return den > 0 ? (P - Q) / sqrt(den) : NAN;
}
/* cnt[i*4 + {P,Q,T,U}] = counts of the pairs (i, j), j != i. Totals are half the sums. */
static void kendall_counts(const double *x, const double *y, int n, double *cnt, double tot[4]) {
    for (int i = 0; i < 4 * n; i++) cnt[i] = 0;
    #pragma omp parallel for schedule(dynamic, 64) if (n > 2000)
    for (int i = 0; i < n; i++) {
        /* branch-free counts (vectorisable); the j == i term is tied in both and counts nowhere */
        long c0 = 0, c1 = 0, c2 = 0, c3 = 0;
        const double xi = x[i], yi = y[i];
        #pragma omp simd reduction(+ : c0, c1, c2, c3)
        for (int j = 0; j < n; j++) {
            int a = (xi > x[j]) - (xi < x[j]), b = (yi > y[j]) - (yi < y[j]), ab = a * b;
            c0 += ab > 0;
            c1 += ab < 0;
            c2 += (a == 0) & (b != 0);
            c3 += (a != 0) & (b == 0);
        }
        cnt[4 * i] = c0; cnt[4 * i + 1] = c1; cnt[4 * i + 2] = c2; cnt[4 * i + 3] = c3;
    }
    for (int k = 0; k < 4; k++) tot[k] = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) tot[k] += cnt[4 * i + k];
    for (int k = 0; k < 4; k++) tot[k] *= 0.5;
}

double corr_kendall_tau_b(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double *cnt = xmalloc(4 * n * sizeof(double)), tot[4];
    kendall_counts(x, y, n, cnt, tot);
    free(cnt);
    return tau_from(tot[0], tot[1], tot[2], tot[3]);
}

static double jackknife_se(const double *th, int n) {
    double m = 0;
    int k = 0;
    for (int i = 0; i < n; i++) if (isfinite(th[i])) { m += th[i]; k++; }
    if (k < n || n < 3) return NAN;
    m /= n;
    double s = 0;
    for (int i = 0; i < n; i++) s += (th[i] - m) * (th[i] - m);
    return sqrt((n - 1.0) / n * s);
}

void corr_summary_compute(const double *x, const double *y, int n, corr_summary *o) {
    o->n = n;
    o->pearson = corr_pearson(x, y, n);
    o->spearman = corr_spearman(x, y, n);
    o->se_pearson = o->se_spearman = o->se_kendall = NAN;
    o->kendall = NAN;
    if (n < 2) return;
    double *th = xmalloc(n * sizeof(double));
    double *cnt = xmalloc(4 * n * sizeof(double)), tot[4];
    kendall_counts(x, y, n, cnt, tot);
    o->kendall = tau_from(tot[0], tot[1], tot[2], tot[3]);
    if (n >= 3) {
        for (int i = 0; i < n; i++)
            th[i] = tau_from(tot[0] - cnt[4 * i], tot[1] - cnt[4 * i + 1], tot[2] - cnt[4 * i + 2], tot[3] - cnt[4 * i + 3]);
        o->se_kendall = jackknife_se(th, n);

        /* Pearson leave-one-out from raw moments about the full-sample means (stable enough: the
         * shift makes the moments small). */
        double mx = 0, my = 0;
        for (int i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
        mx /= n; my /= n;
        double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
        for (int i = 0; i < n; i++) {
            double a = x[i] - mx, b = y[i] - my;
            sx += a; sy += b; sxx += a * a; syy += b * b; sxy += a * b;
        }
        for (int i = 0; i < n; i++) {
            double a = x[i] - mx, b = y[i] - my, m = n - 1;
            double Sx = sx - a, Sy = sy - b;
            double vxx = (sxx - a * a) - Sx * Sx / m, vyy = (syy - b * b) - Sy * Sy / m, vxy = (sxy - a * b) - Sx * Sy / m;
            th[i] = vxx > 0 && vyy > 0 ? vxy / sqrt(vxx * vyy) : NAN;
        }
        o->se_pearson = jackknife_se(th, n);

        /* Spearman leave-one-out: removing item i lowers the average rank of every larger value by
         * 1 and of every value tied with x_i by 1/2; the other ranks are unchanged. */
        double *rx = xmalloc(2 * n * sizeof(double)), *ry = rx + n;
        ranks_average(x, n, rx);
        ranks_average(y, n, ry);
        const double c = 0.5 * (n + 1); /* mean rank: centring keeps the one-pass sums accurate */
        #pragma omp parallel for schedule(static) if (n > 2000)
        for (int i = 0; i < n; i++) {
            double su = 0, sv = 0, suu = 0, svv = 0, suv = 0;
            const double xi = x[i], yi = y[i];
            #pragma omp simd reduction(+ : su, sv, suu, svv, suv)
            for (int j = 0; j < n; j++) {
                double u = rx[j] - c - (x[j] > xi ? 1.0 : x[j] == xi ? 0.5 : 0.0);
                double v = ry[j] - c - (y[j] > yi ? 1.0 : y[j] == yi ? 0.5 : 0.0);
                double keep = j != i;
                u *= keep; v *= keep;
                su += u; sv += v; suu += u * u; svv += v * v; suv += u * v;
            }
            double m = n - 1, vu = suu - su * su / m, vv = svv - sv * sv / m, cuv = suv - su * sv / m;
            th[i] = vu > 0 && vv > 0 ? cuv / sqrt(vu * vv) : NAN;
        }
        o->se_spearman = jackknife_se(th, n);
        free(rx);
    }
    free(cnt);
    free(th);
}

double normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }

static corr_ztest finish(double z) {
    corr_ztest t = {z, 2.0 * (1.0 - normal_cdf(fabs(z))), 1.0 - normal_cdf(z), NAN, NAN};
    return t;
}

corr_ztest steiger_z1star(double r_jk, double r_jh, double r_kh, int n) {
    double rm = 0.5 * (r_jk + r_jh), rm2 = rm * rm;
    double c = (r_kh * (1 - 2 * rm2) - 0.5 * rm2 * (1 - 2 * rm2 - r_kh * r_kh)) / ((1 - rm2) * (1 - rm2));
    double z = (atanh(r_jk) - atanh(r_jh)) * sqrt(n - 3.0) / sqrt(2.0 - 2.0 * c);
    return finish(z);
}

corr_ztest mrr_z(double r_jk, double r_jh, double r_kh, int n) {
    double mr2 = 0.5 * (r_jk * r_jk + r_jh * r_jh);
    double f = (1 - r_kh) / (2 * (1 - mr2));
    if (f > 1) f = 1;
    double h = (1 - f * mr2) / (1 - mr2);
    double dz = atanh(r_jk) - atanh(r_jh);
    double z = dz * sqrt((n - 3.0) / (2 * (1 - r_kh) * h));
    corr_ztest t = finish(z);
    double half = 1.959963984540054 * sqrt(2 * (1 - r_kh) * h / (n - 3.0));
    t.ci_lo = dz - half;
    t.ci_hi = dz + half;
    return t;
}
