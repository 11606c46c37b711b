"""The three-valued comparator (after Chromium Pinpoint), claim checks, and the sequential A/B driver."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.stats.sequential import log_t_p, nominal_levels
from specdoctor.stats.summary import diff_of_medians_ci, iqr, median_ci
from specdoctor.stats.thresholds import HIGH_THRESHOLDS, LOW_THRESHOLD, high_threshold, min_p

__all__ = ["Outcome", "Comparison", "compare", "ClaimCheck", "compare_to_claim", "SequentialResult",
           "sequential_ab", "looks_for", "look_sizes", "GrowingArm", "GROWING_CAP", "DEFAULT_MAGNITUDE_PCT", "RANK_AGREEMENT_P"]

Outcome = Literal["DIFFERENT", "SAME", "UNKNOWN"]
DEFAULT_MAGNITUDE_PCT = 5.0
"""Without a magnitude, SAME means "no change as large as 5 % of A's median"."""
_MAX_IQR = max(HIGH_THRESHOLDS)
RANK_AGREEMENT_P = 0.05
"""At a sequential look the t-test carries the error budget; the rank test must agree at this level so that one
outlier-shaped sample (where a t-test is least trustworthy) cannot carry a DIFFERENT on its own."""


class Comparison(BaseModel):
    """A vs B: outcome, p-values, and the effect (B - A) in the user's unit with a bootstrap CI."""

    outcome: Outcome
    p_value: float = Field(description="min(p_KS, p_MWU).")
    p_ks: float
    p_mwu: float
    n_a: int
    n_b: int
    median_a: float
    median_b: float
    delta: float = Field(description="median(B) - median(A), in `unit`.")
    delta_ci: tuple[float, float] = Field(description="95 % bootstrap CI of delta.")
    pct_change: float = Field(description="100 * delta / median(A).")
    unit: str = ""
    higher_is_better: bool = True
    verdict: Literal["better", "worse", "no change", "undecided"] = "undecided"
    magnitude: float = Field(description="The effect size that SAME rules out, in `unit`.")
    magnitude_iqr: float
    low_threshold: float
    high_threshold: float
    reason: str = ""
    test: Literal["rank", "sequential-log-t"] = Field(
        default="rank", description="What decided DIFFERENT: min(KS, MWU) at low_threshold, or (at a look of the "
                                    "sequential driver) Student's t on log values at the look's nominal level.")
    p_t: float | None = Field(default=None, description="p of Student's t on log values (sequential looks only).")

    def summary_line(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        p = f"p={self.p_value:.3g}" if self.p_t is None else f"p={self.p_value:.3g}, p_t={self.p_t:.3g}"
        return (f"{self.outcome}: {self.median_a:.4g} -> {self.median_b:.4g}{u} ({self.pct_change:+.1f} %, "
                f"delta {self.delta:+.3g} [{self.delta_ci[0]:+.3g}, {self.delta_ci[1]:+.3g}]), "
                f"{p}, n={self.n_a}/{self.n_b}")


def _spread(a: list[float], b: list[float]) -> float:
    """max(IQR_a, IQR_b) as Pinpoint, but never below the IQR implied by the pooled stdev: with 5 runs a
    sample IQR is often tiny by chance, which would make SAME far too easy."""
    pooled = 0.0
    if len(a) + len(b) > 2:
        ss = sum((x - statistics.fmean(a)) ** 2 for x in a) + sum((x - statistics.fmean(b)) ** 2 for x in b)
        pooled = math.sqrt(ss / (len(a) + len(b) - 2)) * 1.349
    return max(iqr(a), iqr(b), pooled)


def compare(a: Sequence[float], b: Sequence[float], *, unit: str = "", higher_is_better: bool = True,
            magnitude: float | None = None, low_threshold: float = LOW_THRESHOLD, seed: int = 0,
            t_level: float | None = None) -> Comparison:
    """DIFFERENT at p <= low_threshold; SAME when p > the high threshold for (magnitude in IQRs, n); else UNKNOWN.

    `magnitude` is the smallest change worth detecting, in the user's unit (default 5 % of A's median); it is
    converted to multiples of max(IQR_a, IQR_b) as Pinpoint does (floored by the pooled-stdev IQR).
    `t_level` (a look of `sequential_ab`): DIFFERENT is decided instead by Student's t on log values at this
    nominal level, with the rank test agreeing at RANK_AGREEMENT_P; SAME is unchanged.
    """
    a = [float(x) for x in a]
    b = [float(x) for x in b]
    if not a or not b:
        raise ValueError("compare needs at least one value on each side")
    med_a, med_b = statistics.median(a), statistics.median(b)
    delta = med_b - med_a
    pct = 100.0 * delta / med_a if med_a else math.inf if delta else 0.0
    mag = abs(magnitude) if magnitude is not None else abs(med_a) * DEFAULT_MAGNITUDE_PCT / 100.0
    spread = _spread(a, b)
    mag_iqr = mag / spread if spread > 0 else _MAX_IQR
    n = min(len(a), len(b))
    if n >= 2:
        p, p_ks, p_mwu = min_p(a, b)
    else:
        p = p_ks = p_mwu = 1.0
    high = high_threshold(mag_iqr, n)
    p_t = log_t_p(a, b) if t_level is not None else None
    if t_level is not None:
        low_threshold = t_level
    if n < 3:
        outcome: Outcome = "UNKNOWN"
        reason = f"only {n} value(s) per side: need at least 3"
    elif p_t is not None and p_t <= low_threshold and p <= RANK_AGREEMENT_P:
        outcome, reason = "DIFFERENT", (f"log t-test p={p_t:.3g} <= {low_threshold:.3g} (this look's alpha-spending "
                                        f"level), ranks agree p={p:.3g}")
    elif p_t is None and p <= low_threshold:
        outcome, reason = "DIFFERENT", f"p={p:.3g} <= {low_threshold:g}"
    elif p > max(high, LOW_THRESHOLD):  # never SAME at a p-value that one look would call DIFFERENT
        outcome = "SAME"
        reason = f"p={p:.3g} > {high:.3g}: no change as large as {mag:.3g}{' ' + unit if unit else ''} ({mag_iqr:.2f} IQR)"
    else:
        outcome = "UNKNOWN"
        reason = f"{low_threshold:g} < p={p:.3g} <= {high:.3g}: more runs needed"
    ci = diff_of_medians_ci(a, b, seed=seed)
    if outcome == "DIFFERENT":
        verdict = "better" if (delta > 0) == higher_is_better else "worse"
    else:
        verdict = "no change" if outcome == "SAME" else "undecided"
    return Comparison(outcome=outcome, p_value=p, p_ks=p_ks, p_mwu=p_mwu, n_a=len(a), n_b=len(b),
                      median_a=med_a, median_b=med_b, delta=delta, delta_ci=ci, pct_change=pct, unit=unit,
                      higher_is_better=higher_is_better, verdict=verdict, magnitude=mag, magnitude_iqr=mag_iqr,
                      low_threshold=low_threshold, high_threshold=high, reason=reason,
                      test="rank" if p_t is None else "sequential-log-t", p_t=p_t)


class ClaimCheck(BaseModel):
    """Is one claimed figure (an earlier, single number) consistent with what was measured now?"""

    claimed: float
    median: float
    ci_low: float
    ci_high: float
    confidence: float
    n: int
    pct_diff: float = Field(description="100 * (claimed - median) / median.")
    pct_change: float = Field(default=0.0, description="100 * (median - claimed) / claimed: measured vs the claim.")
    outcome: Outcome
    unit: str = ""
    reason: str = ""

    def summary_line(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        return (f"claim {self.claimed:g}{u} is {self.outcome} from measured {self.median:.4g}{u} "
                f"[{self.ci_low:.4g}, {self.ci_high:.4g}] ({self.pct_diff:+.1f} %)")


def compare_to_claim(samples: Sequence[float], claimed: float, *, unit: str = "", tolerance_pct: float = 2.0,
                     confidence: float = 0.99, seed: int = 0, claim_runs: int | None = None) -> ClaimCheck:
    """DIFFERENT when the claim is outside the 99 % CI of the median and > tolerance away; SAME when inside the
    CI or within tolerance (with at least 3 runs); UNKNOWN otherwise (too few runs).

    `claim_runs`: the claimed figure is itself a median of about that many runs on this box, so it carries the
    error today's spread gives such a median. The interval a difference must clear is widened by it (in quadrature);
    the interval reported stays today's. Without it the claim is taken as exact — right while today's reading has
    about as few runs as the claim, too strict once more runs than the claim had tighten today's interval."""
    vals = [float(v) for v in samples]
    if not vals:
        raise ValueError("no samples to compare the claim with")
    med = statistics.median(vals)
    lo, hi = median_ci(vals, confidence, seed)
    pct = 100.0 * (claimed - med) / med if med else math.inf
    widen = math.sqrt(1.0 + len(vals) / claim_runs) if claim_runs else 1.0
    outside = claimed < med - (med - lo) * widen or claimed > med + (hi - med) * widen
    if len(vals) < 3:
        outcome: Outcome = "UNKNOWN"
        reason = f"only {len(vals)} run(s)"
    elif outside and abs(pct) > tolerance_pct:
        outcome, reason = "DIFFERENT", f"outside the {confidence:.0%} CI and {abs(pct):.1f} % > {tolerance_pct:g} % away"
    elif abs(pct) <= tolerance_pct or not outside:
        outcome, reason = "SAME", f"within {'the CI' if not outside else f'{tolerance_pct:g} %'} of the measurement"
    else:
        outcome, reason = "UNKNOWN", "ambiguous"
    return ClaimCheck(claimed=claimed, median=med, ci_low=lo, ci_high=hi, confidence=confidence, n=len(vals),
                      pct_diff=pct, pct_change=100.0 * (med - claimed) / claimed if claimed else math.inf, outcome=outcome, unit=unit, reason=reason)


class SequentialResult(BaseModel):
    """What the A/B driver measured, in order, and the final comparison."""

    comparison: Comparison
    a: list[float]
    b: list[float]
    order: list[str] = Field(description="'A'/'B' in the order runs were made (interleaved).")
    looks: int = Field(description="How many times the comparator was consulted.")
    capped: bool = Field(description="Stopped at the cap while still UNKNOWN.")

    def summary_line(self) -> str:
        return self.comparison.summary_line() + (" (cap reached)" if self.capped else "")


def look_sizes(start: int, step: int, cap: int) -> list[int]:
    """Runs per arm at each look of the sequential driver: start, start+step, ..., cap."""
    return sorted({*range(start, cap, step), cap})


def looks_for(start: int, step: int, cap: int) -> int:
    """How many comparisons a sequential run may make."""
    return len(look_sizes(start, step, cap))


def sequential_ab(measure_a: Callable[[], float], measure_b: Callable[[], float], *, start: int = 4,
                  step: int = 1, cap: int = 30, unit: str = "", higher_is_better: bool = True,
                  magnitude: float | None = None, on_round: Callable[[Comparison], None] | None = None,
                  seed: int = 0, alpha: float = LOW_THRESHOLD) -> SequentialResult:
    """Interleave A and B runs (ABBA..., cancels drift), compare, add `step` runs per side while UNKNOWN, stop at `cap`.

    A group-sequential design: the false-positive budget `alpha` (1 %) is spent over the looks by a
    Hwang-Shih-DeCani function (specdoctor.stats.sequential), so looking after every run keeps the overall
    A/A false-positive rate at or below `alpha` while a large change is called after a few runs.
    """
    if start < 1 or step < 1 or cap < start:
        raise ValueError("need 1 <= start <= cap and step >= 1")
    sizes = look_sizes(start, step, cap)
    levels = nominal_levels(sizes, alpha)
    a: list[float] = []
    b: list[float] = []
    order: list[str] = []
    looks = 0
    for target, level in zip(sizes, levels, strict=True):
        while len(a) < target:
            first_a = len(a) % 2 == 0  # ABBA ordering also cancels linear drift within each pair of pairs
            for side in ("A", "B") if first_a else ("B", "A"):
                (a if side == "A" else b).append(float((measure_a if side == "A" else measure_b)()))
                order.append(side)
        cmp = compare(a, b, unit=unit, higher_is_better=higher_is_better, magnitude=magnitude,
                      seed=seed, t_level=level)
        looks += 1
        if on_round:
            on_round(cmp)
        if cmp.outcome != "UNKNOWN" or target >= cap:
            break
    return SequentialResult(comparison=cmp, a=a, b=b, order=order, looks=looks, capped=cmp.outcome == "UNKNOWN")


GROWING_CAP = 14
"""Most runs a GrowingArm makes on its one server (the plan's bound for the subtraction's launch)."""


class GrowingArm:
    """Sequential looks when one arm is already measured (fixed) and the other grows on one server.

    Two servers cannot hold the GPUs at once, so interleaving A and B would pay a relaunch per round; instead the
    fixed arm's runs stand and the growing arm adds `step` runs per look, up to `cap`, with the 1 % false-positive
    budget spent over those looks (the same alpha-spending as `sequential_ab`). `more` is the callback a trial's
    measuring loop asks after each look; `final` is the last look's comparison (fixed arm as A unless `flip`)."""

    def __init__(self, fixed: Sequence[float], start: int, *, step: int = 3, cap: int = GROWING_CAP,
                 flip: bool = False, alpha: float = LOW_THRESHOLD, magnitude: float | None = None,
                 unit: str = "tok/s"):
        self.fixed = [float(x) for x in fixed]
        self.sizes = look_sizes(max(start, 3), step, max(cap, start, 3))
        self.levels = nominal_levels(self.sizes, alpha)
        self.flip, self.magnitude, self.unit = flip, magnitude, unit

    def _look(self, grown: Sequence[float]) -> Comparison:
        k = sum(1 for n in self.sizes if n < len(grown))  # the look this many runs reach
        a, b = (list(grown), self.fixed) if self.flip else (self.fixed, list(grown))
        return compare(a, b, unit=self.unit, magnitude=self.magnitude, t_level=self.levels[min(k, len(self.levels) - 1)])

    def more(self, grown: Sequence[float]) -> int:
        """Runs to add on the same server (0: decided, or the cap reached)."""
        if self._look(grown).outcome != "UNKNOWN" or len(grown) >= self.sizes[-1]:
            return 0
        return next(n for n in self.sizes if n > len(grown)) - len(grown)

    def final(self, grown: Sequence[float]) -> dict:
        """The comparison at the last look, as a dict (what the actions store)."""
        return self._look(grown).model_dump()
