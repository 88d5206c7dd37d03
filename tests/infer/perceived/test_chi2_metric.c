/* Learned chi2 metric: analytic gradient vs central finite differences; the learner raises the
 * training correlation on a problem whose informative words are known. */
#include <math.h>
#include <string.h>

#include "infer/perceived/chi2_metric.h"
#include "infer/perceived/perceived_stats.h"
#include "nn/base/base.h"
#include "nn/base/rng.h"
#include "tests/test_util.h"

static void l1(float *h, int K) {
    double s = 0;
    for (int k = 0; k < K; k++) s += h[k];
    for (int k = 0; k < K; k++) h[k] /= s;
}

Test(perceived_chi2, distance_and_gradient_vs_finite_differences) {
    const int K = 12, n = 6;
    float h[6 * 12];
    rng_t r = rng_make(11, 2);
    for (int i = 0; i < n * K; i++) h[i] = rng_uniform(&r) < 0.2 ? 0.f : rng_uniform(&r); /* some empty bins */
    h[0] = h[K] = 0; /* a bin empty in both signatures 0 and 1 */
    for (int i = 0; i < n; i++) l1(h + i * K, K);
    double w[12];
    for (int k = 0; k < K; k++) w[k] = 0.3 + 1.5 * rng_uniform_double(&r);
    /* w = 1 reproduces the plain chi2 */
    double plain = 0;
    for (int k = 0; k < K; k++) { double t = h[k] + h[K + k]; if (t > 0) plain += (h[k] - h[K + k]) * (h[k] - h[K + k]) / t; }
    cr_assert_float_eq(chi2_wdist(h, h + K, NULL, K), plain, 1e-6);
    /* single distance gradient */
    double g[12] = {0};
    chi2_wdist_grad(h, h + K, w, K, 1.0, g);
    for (int l = 0; l < K; l++) {
        double e = 1e-6, wp[12], wm[12];
        memcpy(wp, w, sizeof w); memcpy(wm, w, sizeof w);
        wp[l] += e; wm[l] -= e;
        double fd = (chi2_wdist(h, h + K, wp, K) - chi2_wdist(h, h + K, wm, K)) / (2 * e);
        cr_assert(fabs(fd - g[l]) < 1e-6 * (1 + fabs(fd)), "d/dw_%d: analytic %g, fd %g", l, g[l], fd);
    }
    /* the full cost, with both the paper's and the spec's readings of gamma, and lambda > 0 */
    int ia[] = {0, 0, 1, 2, 3, 4, 1}, ib[] = {1, 2, 3, 4, 5, 5, 5}, sim[] = {1, 0, 1, 0, 0, 1, 0};
    chi2_pairs p = {K, h, 7, ia, ib, sim};
    chi2_cfg c;
    for (int variant = 0; variant < 2; variant++) {
        chi2_cfg_default(&c);
        if (variant) { c.slope = 5; c.gamma = 1; c.lambda = 0.01; }
        c.b = chi2_margin(&p);
        cr_assert(c.b > 0);
        double G[12];
        chi2_cost(&p, &c, w, G);
        for (int l = 0; l < K; l++) {
            double e = 1e-6, wp[12], wm[12];
            memcpy(wp, w, sizeof w); memcpy(wm, w, sizeof w);
            wp[l] += e; wm[l] -= e;
            double fd = (chi2_cost(&p, &c, wp, NULL) - chi2_cost(&p, &c, wm, NULL)) / (2 * e);
            cr_assert(fabs(fd - G[l]) < 1e-6 * (1 + fabs(fd)), "variant %d dE/dw_%d: analytic %g, fd %g", variant, l, G[l], fd);
        }
    }
}

/* 4 latent classes; words 0..5 carry the class (two words per class, weak), words 6..39 are loud
 * noise. Similar couples = same class. The right weights up-weight words 0..5. */
Test(perceived_chi2, learner_raises_training_correlation) {
    const int K = 40, n = 80, I = 6;
    float *h = xmalloc(n * K * sizeof(float));
    int cls[80];
    rng_t r = rng_make(3, 9);
    for (int i = 0; i < n; i++) {
        cls[i] = i % 4;
        for (int k = 0; k < K; k++) h[i * K + k] = k < I ? 0.02f * rng_uniform(&r) : 0.1f * rng_uniform(&r);
        h[i * K + (cls[i] * 3) % I] += 0.06f;
        h[i * K + (cls[i] * 3 + 1) % I] += 0.04f;
        l1(h + i * K, K);
    }
    int np = 0, ia[600], ib[600], sim[600];
    for (int i = 0; i < n && np < 600; i++)
        for (int j = i + 1; j < n && np < 600; j += 7) { ia[np] = i; ib[np] = j; sim[np] = cls[i] == cls[j]; np++; }
    chi2_pairs p = {K, h, np, ia, ib, sim};
    chi2_cfg c;
    chi2_cfg_default(&c);
    c.b = chi2_margin(&p);
    double w[40], e0, e1;
    for (int k = 0; k < K; k++) w[k] = 1;
    double s[600], y[600];
    for (int q = 0; q < np; q++) { s[q] = -chi2_wdist(h + ia[q] * K, h + ib[q] * K, w, K); y[q] = sim[q]; }
    double tau0 = corr_kendall_tau_b(s, y, np);
    int it = chi2_learn(&p, &c, w, &e0, &e1);
    cr_assert(it > 0 && e1 < e0, "cost %g -> %g in %d iterations", e0, e1, it);
    for (int q = 0; q < np; q++) s[q] = -chi2_wdist(h + ia[q] * K, h + ib[q] * K, w, K);
    double tau1 = corr_kendall_tau_b(s, y, np);
    cr_assert(tau1 > tau0 + 0.1, "training tau %f -> %f", tau0, tau1);
    cr_log_info("training tau %f -> %f, cost %g -> %g, %d iterations", tau0, tau1, e0, e1, it);
    double wi = 0, wn = 0;
    for (int k = 0; k < K; k++) { if (k < I) wi += w[k] / I; else wn += w[k] / (K - I); cr_assert(w[k] >= 0); }
    cr_assert(wi > 2 * wn, "informative words %f vs noise %f", wi, wn);
    free(h);
}
