"""Which of two references a trial is like: Student's t of its mean log tok/s against the references' midpoint."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field
from scipy import stats

from specdoctor.stats.comparator import look_sizes
from specdoctor.stats.sequential import nominal_levels

__all__ = ["Side", "side_of_midpoint", "midpoint_z", "midpoint_looks", "level_at", "SIDE_ALPHA", "POWER_Z"]

SIDE_ALPHA = 0.05
"""Chance, over all looks of one trial, of putting it on the wrong side (two-sided). Naming an innocent patch
takes two independent trials wrong in opposite directions (it alone 'slow', everything but it 'fast'): at most
0.025² ≈ 6e-4. A stricter level only turns more 8-10 % gaps into 'unresolved' (tests/diagnosis)."""
POWER_Z = float(stats.norm.isf(0.2))
"""Expected |t| above the last look's critical value by this much: 80 % power when the trial is like a reference."""


class Side(BaseModel):
    """A trial placed against the slow and fast references (log tok/s, so a ratio, not a difference)."""

    outcome: Literal["slow", "fast"] | None = Field(description="None: the test cannot tell yet (more runs).")
    t: float = Field(description="(mean log trial - midpoint of the references' mean logs) / its standard error.")
    df: float = Field(description="Degrees of freedom of the pooled variance (all three arms).")
    p: float = Field(description="Two-sided p of 'the trial sits on the midpoint'.")
    level: float = Field(description="Nominal level of this look.")
    gap_pct: float = Field(description="100 * (fast / slow - 1) of the references' geometric means.")
    n: int


def _logs(x: Sequence[float]) -> np.ndarray:
    return np.log(np.asarray([float(v) for v in x], dtype=float))


def _pooled(*arms: np.ndarray) -> tuple[float, int]:
    """Pooled variance of the arms' log values and its degrees of freedom: every arm is the same benchmark on the
    same box, so its run-to-run noise is one quantity (a 5-run reference's own variance is often far too small by
    chance, which would make its mean look precise)."""
    df = sum(len(a) - 1 for a in arms)
    ss = sum(float(((a - a.mean()) ** 2).sum()) for a in arms)
    return (ss / df if df > 0 else 0.0), df


def side_of_midpoint(trial: Sequence[float], slow: Sequence[float], fast: Sequence[float], *,
                     level: float) -> Side:
    """'slow' or 'fast' when the trial's mean differs from the references' midpoint at `level`, else None.

    The question a bisection trial asks is "is this configuration like the slow one or like the fast one?": the
    midpoint between them is the boundary, and the references' own noise enters the standard error (at a
    quarter weight each; one pooled run-to-run variance for all three arms). A patch whose effect is a small part of the gap lands on the fast side; one that is
    half of it never decides (unresolved at the cap), which is right: it neither explains nor clears the gap.
    """
    if min(len(trial), len(slow), len(fast)) < 2 or min(min(trial), min(slow), min(fast)) <= 0:
        raise ValueError("each arm needs at least 2 positive samples")
    lt, ls, lf = _logs(trial), _logs(slow), _logs(fast)
    gap = 100.0 * (math.exp(float(lf.mean() - ls.mean())) - 1)
    d = float(lt.mean() - (ls.mean() + lf.mean()) / 2)
    pooled, df = _pooled(lt, ls, lf)
    var = pooled * (1 / len(lt) + 1 / (4 * len(ls)) + 1 / (4 * len(lf)))
    t = d / math.sqrt(var) if var > 0 else (0.0 if d == 0 else math.copysign(math.inf, d))
    p = float(2 * stats.t.sf(abs(t), df)) if math.isfinite(t) else 0.0
    outcome: Literal["slow", "fast"] | None = None
    if gap > 0 and p <= level:
        outcome = "fast" if t > 0 else "slow"
    return Side(outcome=outcome, t=t, df=df, p=p, level=level, gap_pct=gap, n=len(trial))


def midpoint_z(n_trial: int, slow: Sequence[float], fast: Sequence[float]) -> float:
    """Expected |t| of a trial of `n_trial` runs that is like either reference (noise: the references' pooled)."""
    ls, lf = _logs(slow), _logs(fast)
    half = abs(float(lf.mean() - ls.mean())) / 2
    pooled, _ = _pooled(ls, lf)
    se = math.sqrt(pooled * (1 / n_trial + 1 / (4 * len(ls)) + 1 / (4 * len(lf))))
    return math.inf if se == 0 else half / se


def midpoint_looks(start: int, cap: int) -> list[int]:
    """Runs at each look: start, doubling, then the cap (few looks keep each look's level usable)."""
    sizes, n = [], start
    while n < cap:
        sizes.append(n)
        n *= 2
    return sorted({*sizes, cap}) if cap >= start else look_sizes(cap, 1, cap)


def level_at(n: int, looks: list[int], alpha: float = SIDE_ALPHA) -> float:
    """Nominal level of the look that `n` runs reach (alpha spent over `looks`, stats.sequential)."""
    levels = nominal_levels(looks, alpha)
    for size, lev in zip(looks, levels, strict=True):
        if n <= size:
            return lev
    return levels[-1]
