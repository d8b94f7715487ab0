"""Chebyshev coefficients of the smooth functions that csrc/lower evaluates to float64 accuracy on [x0, inf]:
f is sampled with mpmath in s = (u - L) / (u + L), u = x - x0 (s in [-1, 1]), and the series is cut where every
later coefficient is below 1e-17. Prints the coefficients and the largest relative error of the float64
Clenshaw evaluation over a grid.

    python tools/fit_chebyshev.py
"""
import math

import mpmath as mp

mp.mp.dps = 50
FITS = {  # name: (f, x0, L, its value at infinity)
    "erfcx (elementwise.cpp): (1 + x/2) erfcx(x)": (lambda x: (1 + x / 2) * mp.exp(x * x) * mp.erfc(x), 0, 2,
                                                    1 / (2 * mp.sqrt(mp.pi))),
    "K0 (special_functions.cpp): e^x sqrt(x) K0(x)": (lambda x: mp.exp(x) * mp.sqrt(x) * mp.besselk(0, x), 2, 4,
                                                      mp.sqrt(mp.pi / 2)),
    "K1 (special_functions.cpp): e^x sqrt(x) K1(x)": (lambda x: mp.exp(x) * mp.sqrt(x) * mp.besselk(1, x), 2, 4,
                                                      mp.sqrt(mp.pi / 2)),
}


def fit(f, x0, L, at_inf, nodes=200):
    s = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / nodes) for k in range(nodes)]
    v = [at_inf if t == 1 else f(x0 + L * (1 + t) / (1 - t)) for t in s]
    c = [2 * mp.fsum(v[k] * mp.cos(j * mp.pi * (k + mp.mpf(1) / 2) / nodes) for k in range(nodes)) / nodes
         for j in range(nodes)]
    c[0] /= 2
    n = next(i for i in range(nodes) if max(abs(x) for x in c[i:]) < 1e-17)
    return [float(x) for x in c[:n]]


def clenshaw(c, s):
    b1 = b2 = 0.0
    for ck in reversed(c[1:]):
        b1, b2 = 2 * s * b1 - b2 + ck, b1
    return s * b1 - b2 + c[0]


if __name__ == "__main__":
    for name, (f, x0, L, at_inf) in FITS.items():
        c = fit(f, x0, L, at_inf)
        grid = [x0 + 0.01 * i for i in range(3000)] + [x0 + 30 * 1.01 ** i for i in range(300)]
        err = max(abs(clenshaw(c, (x - x0 - L) / (x - x0 + L)) / float(f(mp.mpf(x))) - 1) for x in grid)
        print(f"{name}: x0 = {x0}, L = {L}, {len(c)} terms, max relative error {err:.1e}")
        print(", ".join(repr(x) for x in c))
