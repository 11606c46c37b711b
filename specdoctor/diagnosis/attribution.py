"""The attribution the verdict and the plan read: the measured gap split into causes, each with its share and CI.

The attribute step's revert trials write `facts.attribution`; the causes that need no trial (bisection, targeted
measurements, /proc) are added here, so a playbook without that step still attributes what it measured.
"""

from __future__ import annotations

from specdoctor.diagnosis.causes import non_revertible_causes
from specdoctor.diagnosis.facts import Case
from specdoctor.models import AttributionFact, CauseFact

__all__ = ["attribution", "cause_line", "without_split"]


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
