/* chi2_metric.h — learned chi-square distance on visual-word signatures (André et al. 2011 §5,
 * spec §3.7): weights w >= 0 on the K words, re-normalised signatures
 *     h~_i(w) = (w o h_i) / ||w o h_i||_1,       d_w(i, j) = chi2(h~_i, h~_j),
 * chi2(x, y) = sum_k (x_k - y_k)^2 / (x_k + y_k) over bins with x_k + y_k > 0,
 * and the margin cost over the similar couples S and the dissimilar couples D
 *     E(w) = 1/|S| sum_S L(s (b - d_w)) + gamma/|D| sum_D L(s (d_w - b)) + lambda ||w - 1||^2,
 * L(z) = log(1 + e^-z). This is the paper's formula as printed in the seed text (gamma weights the
 * dissimilar sum, slope s = 1); the spec's reading (gamma = slope) is s = gamma, weight 1 — both
 * are available through (slope, gamma). Margin b = (median_S d_1 + median_D d_1) / 2 with the
 * initial w = 1, on the training couples, then fixed.
 * Optimiser: projected gradient with Armijo backtracking (projection w = max(w, 0)); with
 * lambda = 0 the cost is scale-invariant in w, so w is rescaled to mean 1 after each step. */
#ifndef ENDORET_CHI2_METRIC_H
#define ENDORET_CHI2_METRIC_H

typedef struct {
    int K;
    const float *h;      /* n * K signatures (>= 0, typically L1-normalised) */
    int np;
    const int *ia, *ib;  /* couples */
    const int *sim;      /* 1 = similar (S), 0 = dissimilar (D) */
} chi2_pairs;

typedef struct {
    double slope, gamma, lambda, b; /* b: margin (set by chi2_margin) */
    int max_iter;
    double tol;                     /* stop when the relative cost decrease of an iteration < tol */
} chi2_cfg;

void chi2_cfg_default(chi2_cfg *c); /* slope 1, gamma 5, lambda 0, max_iter 300, tol 1e-7 */

/* d_w(i, j); w == NULL means w = 1 (the plain chi2 of the L1-normalised signatures). */
double chi2_wdist(const float *hi, const float *hj, const double *w, int K);
/* d_w and its gradient with respect to w (added into grad[K] scaled by `scale`). */
double chi2_wdist_grad(const float *hi, const float *hj, const double *w, int K, double scale, double *grad);
/* Margin from the w = 1 distances: (median over S + median over D) / 2. */
double chi2_margin(const chi2_pairs *p);
/* E(w); grad (K, may be NULL) receives dE/dw. */
double chi2_cost(const chi2_pairs *p, const chi2_cfg *c, const double *w, double *grad);
/* Minimise E from the given w (in/out). Returns the number of iterations; *e0, *e1: cost before/after. */
int chi2_learn(const chi2_pairs *p, const chi2_cfg *c, double *w, double *e0, double *e1);

#endif
