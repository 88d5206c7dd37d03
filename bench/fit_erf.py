"""Fits the piecewise erf polynomials of kernels/cpu/cpu_kernels.h (erf_pw, erf_poly).

a = |x| in pieces of width 1/2, k = floor(2a): piece 0 fits erf(a)/a as a polynomial in a^2
(so erf keeps full relative accuracy near 0); pieces 1..7 fit erf(a) in z = a - (k/2 + 1/4);
piece 8 (a >= 4) is the constant 1. Degree 6 least squares on 2000 Chebyshev nodes (close to
minimax), coefficients rounded to float. Prints the C table and the max error, in float ulps, of
the float Horner evaluation (with FMA, as the AVX-512 kernel does) on a dense sweep.
Run: /usr/bin/python3 bench/fit_erf.py
"""
import numpy as np
from numpy.polynomial import polynomial as P
from scipy.special import erf

DEG = 6


def fit(f, lo, hi, deg, rel=False):
    t = np.cos(np.pi * (np.arange(2000) + 0.5) / 2000)
    x = (lo + hi) / 2 + (hi - lo) / 2 * t
    y = f(x)
    return P.polyfit(x, y, deg, w=1 / np.abs(y) if rel else None)


def erf_over_a(u):
    r = np.sqrt(np.maximum(u, 1e-300))
    return np.where(u > 0, erf(r) / r, 2 / np.sqrt(np.pi))


pieces = [fit(erf_over_a, 0, 0.25, DEG, rel=True)]
for k in range(1, 8):
    c = k / 2 + 0.25
    pieces.append(fit(lambda z, c=c: erf(z + c), -0.25, 0.25, DEG))
pieces.append(np.array([1.0] + [0.0] * DEG))
T = np.array(pieces, dtype=np.float32)


def cfloat(v):
    s = "%.9g" % v
    return s + ("" if "." in s or "e" in s else ".0") + "f"


for j in range(DEG + 1):
    print("    {" + ", ".join(cfloat(v) for v in [T[k][j] for k in range(9)] + [T[8][j]] * 7) + "},")

a = np.linspace(0, 4.2, 4000001).astype(np.float32)
k = np.minimum(np.floor(a * np.float32(2)).astype(int), 8)
res = np.ones_like(a)


def horner_fma(c, z):
    r = np.full_like(z, c[-1])
    for q in range(len(c) - 2, -1, -1):
        r = (r.astype(np.float64) * z + np.float64(c[q])).astype(np.float32)
    return r


for kk in range(9):
    m = k == kk
    if kk == 0:
        res[m] = (horner_fma(T[0], (a[m] * a[m]).astype(np.float32)) * a[m]).astype(np.float32)
    else:
        res[m] = horner_fma(T[kk], (a[m] - np.float32(kk / 2 + 0.25)).astype(np.float32))
want = erf(a.astype(np.float64))
err = np.abs(res - want) / np.spacing(want.astype(np.float32)).astype(np.float64)
print("max error %.2f ulp at a = %g" % (err.max(), a[err.argmax()]))
