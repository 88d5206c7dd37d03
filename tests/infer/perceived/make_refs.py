#!/usr/bin/python3
"""Reference values for tests/infer/perceived/test_stats.c, computed independently with scipy.

Data: 40 pairs with heavy ties (a Likert-like mean score in {-2,-1.5,...,2} and a distance rounded
to 1 decimal). Writes ref_corr.txt: the data, then pearson/spearman/kendall tau-b (scipy) and
their jackknife standard errors (brute-force leave-one-out with scipy).
Run: /usr/bin/python3 tests/infer/perceived/make_refs.py > tests/infer/perceived/ref_corr.txt"""
import numpy as np
from scipy import stats

rng = np.random.default_rng(7)
n = 40
s = rng.choice([-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2], size=n)
d = np.round(1.0 - 0.2 * s + rng.normal(0, 0.4, n), 1)
x = -d  # similarity


def coefs(a, b):
    return (stats.pearsonr(a, b)[0], stats.spearmanr(a, b)[0], stats.kendalltau(a, b, variant="b")[0])


full = coefs(x, s)
loo = np.array([coefs(np.delete(x, i), np.delete(s, i)) for i in range(n)])
se = np.sqrt((n - 1) / n * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0))
print(n)
for i in range(n):
    print("%.17g %.17g" % (x[i], s[i]))
print("%.17g %.17g %.17g" % full)
print("%.17g %.17g %.17g" % tuple(se))
