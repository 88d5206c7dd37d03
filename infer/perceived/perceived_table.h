/* perceived_table.h — the paper's table 1 layout: one column per method, rows Pearson / Spearman /
 * Kendall tau-b each with its standard error, then "Steiger's Z-test on tau" (the methods this
 * column beats, one-sided, at level alpha) and the largest of those p-values. Shared by
 * `eval perceived` and `bow cv` (before/after metric learning). */
#ifndef ENDORET_PERCEIVED_TABLE_H
#define ENDORET_PERCEIVED_TABLE_H

#include <stdio.h>

#include "infer/perceived/perceived_stats.h"

/* tau_between[i*nm + j] = Kendall tau-b between the similarities of methods i and j over the same
 * pairs (the r_kh of Steiger's test). Fills steiger[i*nm + j] = test of method i > method j. */
void perceived_compare(const corr_summary *cs, const double *tau_between, int nm, corr_ztest *steiger);
void perceived_table_print(FILE *f, const char *const *names, const corr_summary *cs, const corr_ztest *steiger,
                           int nm, double alpha);

#endif
