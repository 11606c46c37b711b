"""Pinpoint-style high thresholds: p above them means "no difference as large as the magnitude" (SAME)."""

from __future__ import annotations

import bisect
import math
import warnings

import numpy as np
from scipy import stats

__all__ = ["LOW_THRESHOLD", "SIZES", "HIGH_THRESHOLDS", "high_threshold", "min_p", "simulate_high_threshold"]

LOW_THRESHOLD = 0.01
"""p <= this -> DIFFERENT (Pinpoint's low threshold)."""

SIZES = (3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 25, 30, 35, 40, 50, 60, 80, 100, 120, 150)
"""Samples per side for the columns of HIGH_THRESHOLDS."""

# Magnitude (in IQR multiples) -> 99th percentile of min(p_KS, p_MWU) when two normal samples of size n lie
# that far apart (10,000 simulations per cell, seed 20240601, `simulate_high_threshold`), made monotone in n.
# Like Pinpoint's table: 1.0 x IQR drops below 0.01 at ~30 samples per side, 2.0 x IQR at ~10.
HIGH_THRESHOLDS: dict[float, tuple[float, ...]] = {
    0.25: (1.0, 1.0, 1.0, 1.0, 1.0, 0.9801, 0.9801, 0.9801, 0.977, 0.977, 0.9549, 0.9549, 0.9549, 0.9536, 0.9536, 0.9438, 0.9188, 0.915, 0.8977, 0.8471, 0.8061, 0.6967, 0.5322),
    0.5: (1.0, 1.0, 1.0, 1.0, 1.0, 0.9801, 0.9801, 0.9698, 0.931, 0.9205, 0.9205, 0.8868, 0.8604, 0.8159, 0.7063, 0.565, 0.5285, 0.2932, 0.1821, 0.0612, 0.0202, 0.0068, 0.001),
    0.75: (1.0, 1.0, 1.0, 0.9372, 0.9372, 0.9372, 0.9296, 0.8501, 0.8501, 0.6625, 0.6625, 0.4964, 0.4409, 0.2444, 0.1413, 0.0669, 0.0399, 0.0115, 0.0025, 0.0002, 0.0001, 0.0001, 0.0001),
    1.0: (1.0, 1.0, 1.0, 0.9307, 0.8048, 0.7209, 0.6588, 0.5708, 0.4025, 0.2415, 0.1935, 0.1173, 0.0811, 0.027, 0.0112, 0.0027, 0.0009, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001),
    1.5: (1.0, 0.7714, 0.5476, 0.3939, 0.2593, 0.1605, 0.112, 0.064, 0.0314, 0.0108, 0.0056, 0.0018, 0.0009, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001),
    2.0: (0.6, 0.3429, 0.1508, 0.0931, 0.053, 0.0207, 0.0104, 0.0073, 0.002, 0.0006, 0.0002, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001),
    3.0: (0.2, 0.0571, 0.0159, 0.0087, 0.0023, 0.0011, 0.0007, 0.0002, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001),
    4.0: (0.1, 0.0286, 0.0079, 0.0022, 0.0006, 0.0002, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001),
}


def min_p(a, b) -> tuple[float, float, float]:
    """(min p, p_KS, p_MWU): MWU misses variance changes, KS misses discrete shifts, so use both."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p_mwu = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        p_ks = float(stats.ks_2samp(a, b).pvalue)
    if math.isnan(p_mwu):
        p_mwu = 1.0
    if math.isnan(p_ks):
        p_ks = 1.0
    return min(p_ks, p_mwu), p_ks, p_mwu


def high_threshold(magnitude_iqr: float, n: int) -> float:
    """The SAME threshold for an effect of `magnitude_iqr` IQRs at `n` samples per side (interpolated)."""
    if n < SIZES[0] or not math.isfinite(magnitude_iqr) or magnitude_iqr <= 0:
        return 1.0
    col = bisect.bisect_right(SIZES, n) - 1  # the largest tabled n <= n: conservative
    mags = sorted(HIGH_THRESHOLDS)
    m = min(max(magnitude_iqr, mags[0]), mags[-1])
    hi = bisect.bisect_left(mags, m)
    if mags[hi] == m:
        return HIGH_THRESHOLDS[m][col]
    lo_m, hi_m = mags[hi - 1], mags[hi]
    t = (math.log(m) - math.log(lo_m)) / (math.log(hi_m) - math.log(lo_m))
    lo_v, hi_v = math.log(HIGH_THRESHOLDS[lo_m][col]), math.log(HIGH_THRESHOLDS[hi_m][col])
    return math.exp(lo_v + t * (hi_v - lo_v))


def simulate_high_threshold(magnitude_iqr: float, n: int, trials: int = 2000, seed: int = 0) -> float:
    """Recompute one table cell: the 99th percentile of min(p) for normals `magnitude_iqr` IQRs apart."""
    rng = np.random.default_rng(seed)
    iqr = stats.norm.ppf(0.75) - stats.norm.ppf(0.25)
    a = rng.normal(size=(trials, n))
    b = rng.normal(loc=magnitude_iqr * iqr, size=(trials, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = np.minimum(stats.mannwhitneyu(a, b, axis=1, alternative="two-sided").pvalue,
                       stats.ks_2samp(a, b, axis=1).pvalue)
    return float(np.quantile(p, 0.99))
