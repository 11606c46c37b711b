"""What the run already measured, used by the attribution: a promotion that overrode a difference is evidence for it.

An /etc/nccl.conf line no value reverts to NCCL's own choice (NCCL_P2P_LEVEL: 'auto' has no spelling) has no revert
trial of its own, so an attribution that named the launch script's variable stopped there, leaving half the gap
"not explained" — while the NCCL promotion had already measured the very variable set in the environment (conf
lines yield to it) and won. That override is the trial the conf line lacks: the attribution tests it like any revert.
"""

from __future__ import annotations

from typing import Literal

from specdoctor.engine.state import StateView
from specdoctor.models import Delta, Revert
from specdoctor.tools.nccl.nccl_promote import NcclPromotion

__all__ = ["control_is_trial", "promoted_override"]


def promoted_override(d: Delta, promo: NcclPromotion | None) -> Delta | None:
    """`d` made revertible by the value the NCCL promotion measured in its place: a promoted configuration that sets
    exactly this variable (nothing else) and measured faster than today's workers (comparator DIFFERENT, better).
    None when `d` already has a revert, is not an NCCL variable set outside the workers' launch, or nothing of the
    promotion overrode it alone with a decided gain."""
    if promo is None or d.kind != "env" or d.revert is not None or not d.name.startswith("NCCL_") \
            or "nccl.conf" not in d.source:
        return None
    for r in promo.results:
        # what the candidate changed against the workers' setting it was compared with (candidates carry it whole)
        changed = {k: v for k, v in r.env.items() if promo.reference_env.get(k) != v}
        value = changed.get(d.name)
        if set(changed) != {d.name} or r.unset or value is None or value == d.current or r.skipped:
            continue
        if r.outcome == "DIFFERENT" and (r.delta or 0.0) > 0:
            why = (f"{d.why + '; ' if d.why else ''}no value gives NCCL's own choice back, but the NCCL promotion "
                   f"measured {d.name}={value} over it ({r.pct_change or 0.0:+.1f} % tok/s; nccl.conf lines yield "
                   "to the environment): the revert trial sets that value")
            return d.model_copy(update={"revertible": True, "revert": Revert(env={d.name: value}), "why": why})
    return None


def control_is_trial(view: StateView, metric: Literal["spec", "baseline"]) -> bool:
    """Today's runs on `metric` came from a trial launch of today's configuration with today's workload (the
    reproduce step's launch, as the revert trials launch it), not from your running server nor another workload:
    they stand for "every delta kept" in the revert search."""
    facts = view.run_facts
    if facts.measure_today_workload is not None:
        return False
    today = getattr(facts.measure, metric) if facts.measure is not None else None
    return today is not None and bool(today.samples) and not today.label.startswith("spec (running server")
