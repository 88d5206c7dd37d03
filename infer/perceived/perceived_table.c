/* perceived_table.c — see perceived_table.h. */
#include "infer/perceived/perceived_table.h"

#include <math.h>
#include <string.h>

void perceived_compare(const corr_summary *cs, const double *tau_between, int nm, corr_ztest *steiger) {
    for (int i = 0; i < nm; i++)
        for (int j = 0; j < nm; j++) {
            if (i == j) { steiger[i * nm + j] = (corr_ztest){NAN, NAN, NAN, NAN, NAN}; continue; }
            steiger[i * nm + j] = steiger_z1star(cs[i].kendall, cs[j].kendall, tau_between[i * nm + j], cs[i].n);
        }
}

static void pct(char *b, size_t n, double v) {
    if (isfinite(v)) snprintf(b, n, "%.1f %%", 100 * v);
    else snprintf(b, n, "n/a");
}

void perceived_table_print(FILE *f, const char *const *names, const corr_summary *cs, const corr_ztest *steiger,
                           int nm, double alpha) {
    const int W = 16;
    char cell[64];
    fprintf(f, "%-26s", "CBIR method M");
    for (int i = 0; i < nm; i++) { snprintf(cell, sizeof cell, "M%d", i + 1); fprintf(f, "%*s", W, cell); }
    fprintf(f, "\n%-26s", "");
    for (int i = 0; i < nm; i++) fprintf(f, "%*.*s", W, W - 1, names[i]);
    fputc('\n', f);
    const char *rows[] = {"Pearson r", "  standard error", "Spearman rho", "  standard error", "Kendall tau-b", "  standard error"};
    for (int r = 0; r < 6; r++) {
        fprintf(f, "%-26s", rows[r]);
        for (int i = 0; i < nm; i++) {
            double v[] = {cs[i].pearson, cs[i].se_pearson, cs[i].spearman, cs[i].se_spearman, cs[i].kendall, cs[i].se_kendall};
            pct(cell, sizeof cell, v[r]);
            fprintf(f, "%*s", W, cell);
        }
        fputc('\n', f);
    }
    if (nm < 2) return;
    fprintf(f, "%-26s", "Steiger's Z-test on tau");
    for (int i = 0; i < nm; i++) {
        char b[64] = "";
        int any = 0;
        for (int j = 0; j < nm; j++) {
            if (j == i || !(steiger[i * nm + j].p_greater < alpha)) continue;
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, "%sM%d", any ? "-" : "> ", j + 1);
            any = 1;
        }
        fprintf(f, "%*s", W, any ? b : "-");
    }
    fprintf(f, "\n%-26s", "  p-value");
    for (int i = 0; i < nm; i++) {
        double pmax = -1;
        for (int j = 0; j < nm; j++)
            if (j != i && steiger[i * nm + j].p_greater < alpha && steiger[i * nm + j].p_greater > pmax) pmax = steiger[i * nm + j].p_greater;
        if (pmax < 0) snprintf(cell, sizeof cell, "-");
        else if (pmax < 1e-4) snprintf(cell, sizeof cell, "p < 1e-4");
        else snprintf(cell, sizeof cell, "p = %.3g", pmax);
        fprintf(f, "%*s", W, cell);
    }
    fprintf(f, "\n(standard errors: jackknife; Steiger z1* one-sided on Kendall tau-b, alpha = %g, n = %d pairs)\n", alpha, cs[0].n);
}
