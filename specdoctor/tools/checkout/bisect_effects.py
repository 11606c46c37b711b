"""The patch bisection's first search: effect sizes (stats.effects), so independent culprits are each measured.

A trial of essentials + S estimates how much S costs against both references; a subset holding one of two
independent culprits is half slow — a measurement ("partial"), not an undecided comparison. When the effect search
names culprits and both of its checks held (every other patch is fast; the culprits alone reproduce the gap, their
effects adding up), the bisection ends with each culprit's own effect and share. Otherwise (an interaction, a failed
trial, nothing material) it says why and the caller runs the slow/fast search, which handles interacting sets.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, Field

from specdoctor.models.phases import PhaseEffect
from specdoctor.stats.ddmin import SearchResult, TrialRecord
from specdoctor.stats.effects import Z95, Z99, EffectSearch, effect_of, search_effects
from specdoctor.stats.nearer import midpoint_looks

__all__ = ["EFFECT_RUN_CAP", "CulpritEffect", "effects_search", "culprit_effects"]

EFFECT_RUN_CAP = 40
"""Runs on one trial server before its effect is taken as measured. A run costs seconds and a launch minutes of box
time: on a noisy box (5 % run to run) a culprit of a third of a 12 % gap needs ~20-40 runs to be named at 99 %;
stopping at 15 sent the twin's two-culprit story into extra search rounds (19 launches where 8 were needed)."""


class _TrialLike(Protocol):
    samples: list[float]
    outcome: str
    cause: str | None


RunTrial = Callable[[list[str], str, "dict[str, Any] | None", Any], Any]


class CulpritEffect(BaseModel):
    """One independent culprit's own effect (tok/s; negative: slower) and its share of the whole gap, each with a
    95 % CI, from one additive fit over every trial and both references."""

    path: str
    effect_tps: float
    ci_low: float
    ci_high: float
    share: float = Field(description="effect ÷ the gap between the references.")
    share_low: float
    share_high: float
    phase_effect: PhaseEffect | None = Field(default=None, description="The phase it moves: it alone on the "
                                             "essentials against essentials only, both profiled.")


def _se(xs: list[float]) -> float:
    """Standard error of a median (≈ 1.2533·sd/√n); infinite below 2 runs."""
    return 1.2533 * statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) >= 2 else math.inf


class _Abort(Exception):
    """A trial gave no measurement (a conflict, a failed start): additivity cannot be read around it."""


def culprit_effects(found: EffectSearch) -> list[CulpritEffect]:
    """The search's culprits as the bisection's result keeps them."""
    out = []
    for c in found.culprits:
        lo, hi = c.effect.ci
        out.append(CulpritEffect(path=c.name, effect_tps=round(c.effect.delta, 2), ci_low=round(lo, 2),
                                 ci_high=round(hi, 2), share=round(c.share, 3), share_low=round(c.share_ci[0], 3),
                                 share_high=round(c.share_ci[1], 3)))
    return out


def effects_search(items: list[str], run: RunTrial, *, slow: list[float], fast: list[float], runs: int,
                   max_runs: int, measure: dict[str, Any], material_share: float = 0.2
                   ) -> tuple[SearchResult | None, EffectSearch | None, list[str]]:
    """Run the effect search over `items` with `run(subset, purpose, measure, judge) -> Trial` (one call = one
    launch). (the bisection's result, or None when the slow/fast search must decide; the effect search; notes).
    `slow` and `fast` are extended in place by any re-measurement: a later search starts from them."""
    if len(items) < 2 or len(slow) < 3 or len(fast) < 3:
        return None, None, ["effect search not run: fewer than 2 patches or references of fewer than 3 runs"]
    threshold = material_share * abs(effect_of(slow, fast).delta)
    cap = max(runs, min(max_runs, EFFECT_RUN_CAP))
    looks = midpoint_looks(runs, cap)
    records: list[TrialRecord] = []
    notes: list[str] = []
    # Every effect is read against the fast reference and the gap between both: a reference whose median is less
    # precise than a material effect would make an innocent half look like a part of the gap. Measured again
    # (one launch each, `cap` runs) before the search, as the slow/fast search does for its midpoint.
    for ref, subset, label in ((fast, [], "essentials only"), (slow, list(items), "all patches")):
        if Z95 * _se(ref) > threshold:
            t = run(subset, f"effect search: reference again ({label}), {cap} runs", {**measure, "runs": cap,
                                                                                     "max_runs": cap}, None)
            if len(t.samples) >= 3:
                t.outcome = "regressed" if subset else "same"
                t.cause = f"reference measured again: {len(ref)} runs were too few for a {threshold:.1f} tok/s effect"
                ref += list(t.samples)
                notes.append(f"effect search: {label} measured again ({len(ref)} runs)")
    gap = effect_of(slow, fast)
    threshold, sign = material_share * abs(gap.delta), (-1.0 if gap.delta < 0 else 1.0)

    def measured(subset: frozenset[str], purpose: str) -> list[float]:
        single = len(subset) == 1

        def judge(samples: list[float]) -> str | None:
            if len(samples) < 3:
                return None
            e = effect_of(samples, fast)
            if e.material(threshold, sign, Z99 if single else Z95):
                return "regressed"
            return "same" if e.along(sign)[2] < threshold else None

        chosen = [p for p in items if p in subset]
        t: _TrialLike = run(chosen, f"effect search: {purpose}", {**measure, "runs": looks[0], "max_runs": cap},
                            judge)
        if len(t.samples) < 3:
            raise _Abort(t.cause or "no runs")
        e = effect_of(t.samples, fast)
        x, lo, hi = e.along(sign)
        if t.outcome not in ("regressed", "same"):  # between the references: a measured part of the gap
            t.outcome = "partial"
        t.cause = (f"effect {e.delta:+.1f} tok/s [{e.ci[0]:+.1f}, {e.ci[1]:+.1f}] against essentials only, "
                   f"{x / abs(gap.delta):.0%} of the gap" + (" (a part of it: measured, not undecided)"
                                                               if t.outcome == "partial" else ""))
        records.append(TrialRecord(subset=sorted(chosen), outcome="regressed" if t.outcome == "regressed" else
                                   "same" if t.outcome == "same" else "unresolved", purpose=purpose))
        return list(t.samples)

    try:
        found = search_effects(items, measured, slow=slow, fast=fast, material_share=material_share)
    except _Abort as exc:
        return None, None, notes + [f"effect search stopped: a trial gave no measurement ({exc}); the slow/fast search "
                            "decides"]
    notes += [f"effect search: gap {gap.delta:+.1f} tok/s, material at {threshold:.1f}; {found.verdict} in "
              f"{found.launches} launches"] + list(found.notes)
    if found.verdict != "culprits" or not found.confirmed_both_ways:
        notes.append("effect search named no independent culprit set (" + found.verdict + "): the slow/fast search "
                     "decides")
        return None, found, notes
    names = [c.name for c in found.culprits]
    notes.append("effect search: " + "; ".join(
        f"{c.name.rsplit('/', 1)[-1]} {c.effect.delta:+.1f} tok/s [{c.effect.ci[0]:+.1f}, {c.effect.ci[1]:+.1f}], "
        f"share {c.share:.0%} [{c.share_ci[0]:.0%}, {c.share_ci[1]:.0%}]" for c in found.culprits)
        + "; every other patch without them is fast, they alone reproduce the gap, additive (no interaction)")
    result = SearchResult(verdict="culprit", culprits=names, confirmed=True, tests=found.launches, trials=records,
                          notes=notes)
    return result, found, notes

