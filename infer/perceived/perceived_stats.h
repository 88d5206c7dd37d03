/* perceived_stats.h — correlation coefficients for ordinal (Likert) data, with jackknife standard
 * errors, and the tests that compare two dependent correlations sharing one variable.
 *
 * Kendall tau-b (spec §3.5): tau_b = (P - Q) / sqrt((P + Q + T)(P + Q + U)), P concordant, Q
 * discordant, T tied only in x, U tied only in y; a pair tied in both counts in neither.
 * Spearman rho: Pearson correlation of average ranks (ties share the mean of their positions).
 * Standard error: the jackknife, sigma = sqrt((n-1)/n * sum_i (theta_(-i) - mean)^2), i.e. the
 * standard deviation of the estimator (the paper's sigma_est). Computed exactly in O(n^2) for all
 * three coefficients (leave-one-out updates of the sums / ranks / pair counts). */
#ifndef ENDORET_PERCEIVED_STATS_H
#define ENDORET_PERCEIVED_STATS_H

/* NaN when undefined (n < 2, or a constant variable). */
double corr_pearson(const double *x, const double *y, int n);
double corr_spearman(const double *x, const double *y, int n);
double corr_kendall_tau_b(const double *x, const double *y, int n);
/* Average ranks, 1-based: rank[i] of x[i]. */
void ranks_average(const double *x, int n, double *rank);

typedef struct {
    int n;
    double pearson, spearman, kendall;
    double se_pearson, se_spearman, se_kendall; /* jackknife; NaN when n < 3 */
} corr_summary;
void corr_summary_compute(const double *x, const double *y, int n, corr_summary *out);

/* Standard normal CDF. */
double normal_cdf(double z);

/* Comparison of r_jk with r_jh (j shared; r_kh the correlation between k and h), n observations.
 * z > 0 when r_jk > r_jh. p_two = 2(1 - Phi(|z|)); p_greater = 1 - Phi(z) (H1: r_jk > r_jh).
 * Steiger (1980) z1* with the corrected covariance term (spec §3.6, as in the cocor package);
 * Meng, Rosenthal & Rubin (1992) with f capped at 1; ci_lo/ci_hi: 95% interval of Z_jk - Z_jh
 * (MRR only; NaN for Steiger). */
typedef struct { double z, p_two, p_greater, ci_lo, ci_hi; } corr_ztest;
corr_ztest steiger_z1star(double r_jk, double r_jh, double r_kh, int n);
corr_ztest mrr_z(double r_jk, double r_jh, double r_kh, int n);

#endif
