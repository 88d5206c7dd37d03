/* Correlations on tied data, jackknife errors, Steiger / Meng-Rosenthal-Rubin on published examples. */
#include <math.h>
#include <string.h>

#include "infer/perceived/perceived_stats.h"
#include "tests/test_util.h"

/* Hand-computed: x = 1,2,2,3; y = 1,1,2,2. Pairs: (0,1) tied in y only, (0,2) (0,3) (1,3)
 * concordant, (1,2) tied in x only, (2,3) tied in y only: P=3 Q=0 T=1 U=2,
 * tau_b = 3/sqrt(4*5). Ranks x: 1,2.5,2.5,4; y: 1.5,1.5,3.5,3.5 -> rho = 3/sqrt(4.5*4). */
Test(perceived_stats, hand_computed_ties) {
    double x[] = {1, 2, 2, 3}, y[] = {1, 1, 2, 2};
    cr_assert_float_eq(corr_kendall_tau_b(x, y, 4), 3.0 / sqrt(20.0), 1e-12);
    cr_assert_float_eq(corr_spearman(x, y, 4), 3.0 / sqrt(18.0), 1e-12);
    double r[4];
    ranks_average(x, 4, r);
    cr_assert(r[0] == 1 && r[1] == 2.5 && r[2] == 2.5 && r[3] == 4);
    /* discordant direction flips the sign */
    double ny[] = {-1, -1, -2, -2};
    cr_assert_float_eq(corr_kendall_tau_b(x, ny, 4), -3.0 / sqrt(20.0), 1e-12);
    /* constant variable: undefined */
    double c[] = {5, 5, 5, 5};
    cr_assert(isnan(corr_kendall_tau_b(x, c, 4)) && isnan(corr_pearson(x, c, 4)));
}

/* 40 heavily tied pairs; values from scipy 1.10 (tests/infer/perceived/make_refs.py). */
Test(perceived_stats, scipy_reference_with_jackknife) {
    char path[512];
    snprintf(path, sizeof path, "%s", "tests/infer/perceived/ref_corr.txt");
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s (run tests from the repository root)", path);
    int n;
    cr_assert(fscanf(f, "%d", &n) == 1 && n == 40);
    double x[40], y[40], ref[3], se[3];
    for (int i = 0; i < n; i++) cr_assert(fscanf(f, "%lf %lf", &x[i], &y[i]) == 2);
    cr_assert(fscanf(f, "%lf %lf %lf %lf %lf %lf", &ref[0], &ref[1], &ref[2], &se[0], &se[1], &se[2]) == 6);
    fclose(f);
    corr_summary s;
    corr_summary_compute(x, y, n, &s);
    cr_assert_float_eq(s.pearson, ref[0], 1e-10);
    cr_assert_float_eq(s.spearman, ref[1], 1e-10);
    cr_assert_float_eq(s.kendall, ref[2], 1e-10);
    cr_assert_float_eq(corr_kendall_tau_b(x, y, n), ref[2], 1e-10);
    cr_assert_float_eq(s.se_pearson, se[0], 1e-9);
    cr_assert_float_eq(s.se_spearman, se[1], 1e-9);
    cr_assert_float_eq(s.se_kendall, se[2], 1e-9);
}

/* Steiger (1980), Psychological Bulletin 87:245-251, case A p. 249: r_jk=.4, r_jh=.5, r_kh=.1,
 * n=103; the article prints z = -.8913 using a rounded covariance (.0042); the exact formula gives
 * -0.8887185 (value checked in the cocor package's test suite, tests/testthat/test_cocor.R). Second
 * example: depcor (Silver, Hittner & May 2006): .3,.4,.5, n=100 -> z=-1.0718, p=.2838. */
Test(perceived_stats, steiger_published) {
    corr_ztest t = steiger_z1star(.4, .5, .1, 103);
    cr_assert(fabs(t.z - (-0.8913)) < 0.005, "z = %f", t.z);
    cr_assert_float_eq(t.z, -0.8887185, 1e-6);
    t = steiger_z1star(.3, .4, .5, 100);
    cr_assert_float_eq(t.z, -1.0718, 6e-5);
    cr_assert_float_eq(t.p_two, 0.2838, 6e-5);
}

/* Meng, Rosenthal & Rubin (1992), Psychological Bulletin 111:172-175, worked example: n=15,
 * r_jk=.63, r_jh=-.03, r_kh=-.19 -> z = 1.68, one-sided p = .047, 95% CI of the difference of
 * Fisher z's (-.129, 1.67). Also depcor: .3,.4,.5, n=100 -> z=-1.0707, p=.2843; May & Hittner
 * (1997): .5,.2,.5, n=50 -> 2.245. */
Test(perceived_stats, mrr_published) {
    corr_ztest t = mrr_z(.63, -.03, -.19, 15);
    cr_assert(fabs(t.z - 1.68) < 0.005, "z = %f", t.z);
    cr_assert(fabs(t.p_greater - 0.047) < 0.0005, "p = %f", t.p_greater);
    cr_assert(fabs(t.ci_lo - (-0.129)) < 0.0005 && fabs(t.ci_hi - 1.672) < 0.0015, "ci %f %f", t.ci_lo, t.ci_hi);
    t = mrr_z(.3, .4, .5, 100);
    cr_assert_float_eq(t.z, -1.0707, 6e-5);
    cr_assert_float_eq(t.p_two, 0.2843, 6e-5);
    cr_assert(fabs(mrr_z(.5, .2, .5, 50).z - 2.245) < 0.0005);
    cr_assert(fabs(mrr_z(.7, .4, .8, 50).z - 4.05) < 0.005);
}

Test(perceived_stats, normal_cdf_values) {
    cr_assert_float_eq(normal_cdf(0), 0.5, 1e-15);
    cr_assert_float_eq(normal_cdf(1.959963984540054), 0.975, 1e-12);
}
