"""The attribution the verdict and the plan read: the measured gap split into causes, each with its share and CI.

The attribute step's revert trials write `facts.attribution`; the causes that need no trial (bisection, targeted
measurements, /proc) are added here, so a playbook without that step still attributes what it measured. A run that
recorded no attribution at all gets one read from its claims and the bisection's two measured trials
(`claimed_gap`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Protocol

from specdoctor.diagnosis.causes import non_revertible_causes, revert_patch_command
from specdoctor.diagnosis.facts import Case
from specdoctor.models import AttributionFact, CauseFact
from specdoctor.models.measurement import Measurement
from specdoctor.stats.summary import diff_of_medians_ci

__all__ = ["attribution", "cause_line", "without_split", "ClaimReading", "claimed_gap"]


def attribution(case: Case) -> AttributionFact:
    """The attribute step's fact plus the causes that need no trial (a playbook without that step, or a fact written
    before the bisection or the NCCL promotion): the bisection, targeted measurements and /proc always count."""
    fact = case.facts.attribution or AttributionFact()
    seen = {(c.kind, c.key) for c in fact.causes}
    extra = [c for c in non_revertible_causes(case) if (c.kind, c.key) not in seen]
    causes = [*fact.causes, *extra]
    kept = without_split(causes)
    return fact.model_copy(update={"causes": kept}) if extra or len(kept) < len(causes) else fact


def without_split(causes: list[CauseFact]) -> list[CauseFact]:
    """The causes less each unconfirmed one naming several variables changed together (one NCCL promotion) of
    which a revert trial has confirmed one on its own: that trial says which it was, the joint one adds nothing."""
    def split(c: CauseFact) -> bool:
        keys = set(c.key.split(",")) if not c.confirmed and "," in c.key else set()
        return bool(keys) and any(o.confirmed and o.key in keys for o in causes if o is not c)
    return [c for c in causes if not split(c)]


def _tps(x: float | None) -> str:
    return "?" if x is None else f"{x:+.1f}".replace("-", "−")


def _gap(att: AttributionFact) -> float | None:
    if att.reference_tps is None or att.measured_tps is None:
        return None
    return att.measured_tps - att.reference_tps


def cause_line(c: CauseFact, att: AttributionFact) -> str:
    """'NCCL_P2P_DISABLE=1 set by sitecustomize.py: −6.2 tok/s [−7.0, −5.4] of −6.3' (what is known of it; "of the
    gap" only when the effect was measured on the gap's own figure)."""
    if c.effect_tps is None and c.share_from:
        return f"{c.name} ({c.detail + '; ' if c.detail else ''}{c.share_from})"
    if c.effect_tps is None:
        how = {"targeted-measurement": "measured directly", "bisection": "isolated by bisection",
               "revert-trial": "reverted in a trial", "workload-rerun": "re-measured with the good run's workload"}
        return f"{c.name} ({c.detail or how[c.method]})"
    ci = (f" [{_tps(c.ci_low)}, {_tps(c.ci_high)}]" if c.ci_low is not None and c.ci_high is not None else "")
    gap = _gap(att) if c.metric == att.metric else None
    of = f" of {_tps(gap)}" if gap is not None else ""
    if gap is not None and gap * c.effect_tps > 0 and abs(c.effect_tps) > 1.1 * abs(gap):
        # real H200, env-var story: −351 "of −181" — the revert trial ran faster than the claimed figure itself
        of = f", more than the whole gap ({_tps(gap)}): its trials ran faster than the claimed figure"
    which = "" if c.metric == "spec" else f" ({c.metric})"
    by = f", measured by {c.share_from}" if c.share_from else ""
    return f"{c.name}: {_tps(c.effect_tps)} tok/s{ci}{of}{which}{by}"


class ClaimReading(Protocol):
    """A claim as the run judged it, in the reading shown beside it (the report's row of it)."""

    @property
    def metric(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def claimed(self) -> float | None: ...
    @property
    def median(self) -> float | None: ...
    @property
    def ci_low(self) -> float | None: ...
    @property
    def ci_high(self) -> float | None: ...
    @property
    def pct_change(self) -> float | None: ...
    @property
    def source(self) -> str: ...


def _code_cause(trials: Sequence[Measurement], culprits: Sequence[str], repo: str | None) -> CauseFact | None:
    """The bisection's culprits as one cause, its effect measured as all-patches minus essentials-only (both
    trials measured): the essentials-only trial, and the first other trial with runs."""
    if not culprits or not trials:
        return None
    fast = next((m for m in trials if "essential" in m.label.lower()), None)
    slow = next((m for m in trials if m is not fast and m.samples), None)
    if fast is None or slow is None or not fast.samples or not slow.samples:
        return None
    delta = statistics.median(slow.samples) - statistics.median(fast.samples)
    lo, hi = diff_of_medians_ci(fast.samples, slow.samples)
    names = ", ".join(PurePosixPath(c).name for c in culprits)
    fix = " && ".join(revert_patch_command(repo, c) for c in culprits)
    return CauseFact(name=f"local patch {names}", kind="code", key=",".join(culprits), effect_tps=round(delta, 2),
                     ci_low=round(lo, 2), ci_high=round(hi, 2), confirmed=True, method="bisection", fix=fix)


def claimed_gap(claims: Sequence[ClaimReading], trials: Sequence[Measurement], culprits: Sequence[str],
                repo: str | None) -> AttributionFact | None:
    """The attribution of a run that recorded none: the gap of the tok/s figure that moved most (in %) from its
    claim — the gap a reader asks about — with the bisection's culprits as its one cause when both of their trials
    were measured (`trials`: the backed-up tree's measurements). None without a tok/s claim measured today."""
    measured = [c for c in claims if c.claimed is not None and c.median is not None and c.unit == "tok/s"]
    if not measured:
        return None
    claim = max(measured, key=lambda c: abs(c.pct_change or 0.0))
    assert claim.claimed is not None and claim.median is not None
    causes = [c for c in (_code_cause(trials, culprits, repo),) if c is not None]
    label = "claimed" if claim.source == "--expect" else "good run"
    return AttributionFact(metric=claim.metric, reference_tps=claim.claimed, reference_label=label,
                           measured_tps=claim.median, measured_ci_low=claim.ci_low, measured_ci_high=claim.ci_high,
                           causes=causes)
