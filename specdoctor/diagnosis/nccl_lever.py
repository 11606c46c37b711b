"""The NCCL lever's what-if: the sweep's best setting at the cycle's own sizes and counts, as a change of verify and
the draft steps, and so of the speculative tok/s; the end-to-end A/B (or a confirmed NCCL cause) beside it."""

from __future__ import annotations

import statistics

from specdoctor.diagnosis.facts import Case
from specdoctor.diagnosis.lever_model import WORTH, Lever, confirmed_cause, tps_at, with_measured
from specdoctor.models import MeasureFacts, NcclFact
from specdoctor.tools.nccl.nccl import ConfigResult, NcclSweep

__all__ = ["nccl_lever", "cycle_delta_ms"]


def _reference(sweep: NcclSweep) -> ConfigResult | None:
    ok = [r for r in sweep.results if not r.failed]
    return ok[0] if ok else None  # the sweep runs the workers' own setting first (relative_configs)


def cycle_delta_ms(sweep: NcclSweep, row: ConfigResult, ref: ConfigResult, pick: str = "median") -> dict[str, float]:
    """ms per cycle this setting adds to each phase against the reference: Σ all-reduces × latency change.
    `pick`: 'median', 'low' (its best runs against the reference's worst) or 'high' (the other way)."""
    lat = {p.size: p.samples or ([p.latency_us] if p.latency_us is not None else []) for p in row.points}
    base = {p.size: p.samples or ([p.latency_us] if p.latency_us is not None else []) for p in ref.points}
    out: dict[str, float] = {}
    for w in sweep.weights:
        a, b = lat.get(w.size) or [], base.get(w.size) or []
        if not a or not b:
            continue
        if pick == "low":
            d = min(a) - max(b)
        elif pick == "high":
            d = max(a) - min(b)
        else:
            d = statistics.median(a) - statistics.median(b)
        out[w.phase] = out.get(w.phase, 0.0) + w.per_cycle * d / 1000.0
    return out


def _env_command(row: ConfigResult, ref: ConfigResult, launch: str | None) -> str:
    changed = {k: v for k, v in row.env.items() if ref.env.get(k) != v}
    unset = sorted(set(row.unset) | {k for k in ref.env if k not in row.env})
    parts = ["env", *(f"-u {u}" for u in unset), *(f"{k}={v}" for k, v in sorted(changed.items()))]
    return " ".join(parts) + " " + (launch or "python -m sglang.launch_server …")


def nccl_lever(case: Case) -> Lever | None:
    """The comparator-backed sweep winner at the cycle's sizes, modelled on the speculative cycle; None when the sweep
    was not weighed by the cycle or nothing beat the workers' setting there."""
    sweep = case.tools.nccl_sweep
    measure = case.facts.measure or MeasureFacts()
    be = case.tools.breakeven
    spec = measure.spec.median if measure.spec else None
    if sweep is None or not sweep.weights or not spec or be is None or be.verify_ms is None:
        return None
    ref = _reference(sweep)
    cands = [r for r in sweep.results if r.promote and r.cycle_us is not None and r is not ref]
    if ref is None or ref.cycle_us is None or not cands:
        return None
    best = min(cands, key=lambda r: r.cycle_us or 0.0)
    k = be.steps or 1
    gains = []
    for pick in ("median", "high", "low"):
        d = cycle_delta_ms(sweep, best, ref, pick)
        tps = tps_at(be, spec, verify_ms=max(be.verify_ms + d.get("verify", 0.0), 1e-3),
                     draft_ms=max((be.draft_ms or 0.0) + d.get("draft", 0.0) / k, 0.0))
        if tps is None:
            return None
        gains.append(tps - spec)
    point, low, high = gains
    if point <= WORTH * spec:
        return None
    weights = ", ".join(f"{w.per_cycle:g} × {w.size} B ({w.phase})" for w in sweep.weights)
    lever = Lever(kind="nccl", title=f"NCCL setting {best.label} instead of the workers' {ref.label}",
                  today_tps=spec, gain_tps=point, gain_low=min(low, point), gain_high=max(high, point),
                  assumptions=[f"the cycle sends {weights} all-reduces (2 per target layer in verify, 2 per draft "
                               "step), at the micro-benchmark's latencies; range: its best and worst runs",
                               f"all-reduce per cycle {ref.cycle_us:.0f} → {best.cycle_us:.0f} µs"],
                  command=_env_command(best, ref, case.facts.launch), cost="low (one relaunch)",
                  risk="medium (NCCL debugging knobs; revisit on NCCL upgrade)")
    nccl = case.facts.nccl or NcclFact()
    if nccl.best and nccl.best_gain_pct is not None:
        lever.measured_tps, lever.measured_by = spec * nccl.best_gain_pct / 100.0, f"the end-to-end A/B of {nccl.best}"
        return lever
    return with_measured(lever, confirmed_cause(case, ("nccl_",)))
