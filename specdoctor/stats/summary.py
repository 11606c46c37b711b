"""Summaries of repeated measurements: median with a bootstrap confidence interval, spread, IQR."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field
from scipy import stats

__all__ = ["Summary", "summarize", "median_ci", "diff_of_medians_ci", "iqr"]


class Summary(BaseModel):
    """One number per run, summarised: median, 95 % bootstrap CI of the median, spread."""

    n: int
    median: float | None = None
    mean: float | None = None
    stdev: float | None = None
    cv: float | None = Field(default=None, description="Coefficient of variation (stdev / mean).")
    iqr: float | None = None
    min: float | None = None
    max: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float = 0.95


def iqr(values: Sequence[float]) -> float:
    """Interquartile range (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1)


def _bootstrap(data: tuple, statistic, confidence: float, seed: int) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples warn; the percentile interval is still defined
        res = stats.bootstrap(data, statistic, confidence_level=confidence, n_resamples=2000,
                              method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def median_ci(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap CI of the median (seeded: the same data give the same interval)."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("no values")
    if len(vals) == 1 or min(vals) == max(vals):
        return vals[0] if len(vals) == 1 else min(vals), max(vals)
    return _bootstrap((np.asarray(vals),), lambda x, axis: np.median(x, axis=axis), confidence, seed)


def diff_of_medians_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Bootstrap CI of median(b) - median(a), resampling each side independently."""
    if len(a) < 2 or len(b) < 2 or (min(a) == max(a) and min(b) == max(b)):
        d = statistics.median(b) - statistics.median(a)
        return d, d

    def stat(x, y, axis):
        return np.median(y, axis=axis) - np.median(x, axis=axis)

    return _bootstrap((np.asarray(a, float), np.asarray(b, float)), stat, confidence, seed)


def summarize(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> Summary:
    """Median, CI, spread of one sample (empty input gives n=0 and no numbers)."""
    vals = [float(v) for v in values]
    if not vals:
        return Summary(n=0, confidence=confidence)
    mean = statistics.fmean(vals)
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    lo, hi = median_ci(vals, confidence, seed)
    return Summary(n=len(vals), median=statistics.median(vals), mean=mean, stdev=sd,
                   cv=sd / abs(mean) if mean else None, iqr=iqr(vals), min=min(vals), max=max(vals),
                   ci_low=lo, ci_high=hi, confidence=confidence)
