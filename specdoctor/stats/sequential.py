"""Group-sequential boundaries: the nominal level of each look from an alpha-spending function (Lan-DeMets)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

__all__ = ["SPENDING_GAMMA", "hsd_spending", "nominal_levels", "log_t_p"]

SPENDING_GAMMA = 4.0
"""Hwang-Shih-DeCani gamma: > 0 spends the error budget early (gamma=1 is Pocock-like, -4 O'Brien-Fleming-like).
Benchmark changes worth chasing are large next to run-to-run noise, so most of them can be decided at the first
looks; a front-loaded spend is what makes 4-6 runs per arm enough (benchmarks/comparator_power.py)."""
_GRID = 801  # points of the continuation region per look: error of the recursion << the levels' 4 digits


def hsd_spending(t: float, alpha: float, gamma: float = SPENDING_GAMMA) -> float:
    """Error spent by information fraction t (Hwang, Shih & DeCani 1990): alpha (1 - e^-gt) / (1 - e^-g)."""
    t = min(max(t, 0.0), 1.0)
    if gamma == 0:
        return alpha * t
    return alpha * (1 - math.exp(-gamma * t)) / (1 - math.exp(-gamma))


def nominal_levels(ns: Sequence[int], alpha: float, gamma: float = SPENDING_GAMMA) -> list[float]:
    """Two-sided nominal p-value to reject at each look with `ns[k]` runs per arm, spending `alpha` in total.

    Exact for the z statistic (Armitage-McPherson-Rowe recursion on the continuation region, information
    proportional to runs); applied to t statistics by matching p-values, as Jennison & Turnbull (2000, ch. 11)
    recommend for an unknown variance. Stopping early for SAME only lowers the false-positive rate further.
    """
    if not ns or any(n <= 0 for n in ns) or list(ns) != sorted(set(ns)):
        raise ValueError("looks must be increasing positive run counts")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    return list(_levels(tuple(int(n) for n in ns), float(alpha), float(gamma)))


@lru_cache(maxsize=64)
def _levels(ns: tuple[int, ...], alpha: float, gamma: float) -> tuple[float, ...]:
    info = np.asarray(ns, dtype=float)
    levels: list[float] = []
    prev_u = prev_w = None  # grid of the score S_k = Z_k sqrt(I_k) on the continuation region, density x weight
    prev_info = 0.0
    spent = 0.0
    for k, ik in enumerate(info):
        target = hsd_spending(ik / info[-1], alpha, gamma) - spent
        if prev_u is None or prev_w is None:
            c = float(stats.norm.isf(target / 2))
            crossed = target
        else:
            d = math.sqrt(ik - prev_info)
            u, w = prev_u, prev_w

            def cross(c: float, u: np.ndarray = u, w: np.ndarray = w, d: float = d, ik: float = ik) -> float:
                b = c * math.sqrt(ik)
                return float(np.sum(w * (stats.norm.cdf((-b - u) / d) + stats.norm.sf((b - u) / d))))

            if target <= cross(40.0):
                c = 40.0
            else:
                c = float(optimize.brentq(lambda x, t=target: cross(x) - t, 1e-3, 40.0, xtol=1e-10))
            crossed = cross(c)
        spent += crossed
        levels.append(float(2 * stats.norm.sf(c)))
        b = c * math.sqrt(ik)
        grid = np.linspace(-b, b, _GRID)
        h = grid[1] - grid[0]
        quad = np.full(_GRID, h)
        quad[0] = quad[-1] = h / 2  # trapezoid weights
        if prev_u is None or prev_w is None:
            dens = stats.norm.pdf(grid / math.sqrt(ik)) / math.sqrt(ik)
        else:
            d = math.sqrt(ik - prev_info)
            dens = (prev_w[None, :] * stats.norm.pdf((grid[:, None] - prev_u[None, :]) / d) / d).sum(axis=1)
        prev_u, prev_w, prev_info = grid, dens * quad, ik
        if k == len(info) - 1:
            break
    return tuple(levels)


def log_t_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of Student's t on log values (throughput is multiplicative: a ratio, not a difference).

    1.0 when undefined (identical constant arms); non-positive values cannot be logged -> 1.0 (no evidence).
    """
    if len(a) < 2 or len(b) < 2 or min(min(a), min(b)) <= 0:
        return 1.0
    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    if np.ptp(la) == 0 and np.ptp(lb) == 0:
        return 1.0 if la[0] == lb[0] else 0.0  # two constant, different arms: no noise can explain the gap
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(stats.ttest_ind(la, lb).pvalue)
    return 1.0 if math.isnan(p) else p
