"""References as people have them: the figures a claim may name, and a good run's measurements as claims.

People quote more than tok/s ("verify 19 → 29 ms", "accept length 3.1", "TPOT 12 ms"), and often have no claim at
all but a saved fingerprint of the good run with its measured figures. Both become claims of one shape; each claim
says where it came from and in which direction "worse" lies. Pure: no host, no I/O.
"""

from __future__ import annotations

import statistics
from typing import Any, NamedTuple

from specdoctor.diagnosis.claims import claim_outcome
from specdoctor.models.facts import ClaimFact, Claims, MeasuredFact, MeasureFacts
from specdoctor.models.phases import PhaseStat, PhaseTimes
from specdoctor.stats.comparator import compare_to_claim

__all__ = ["ClaimKey", "CLAIM_KEYS", "FROM_FINGERPRINT", "fingerprint_claims", "claims_for", "metric_claim"]

FROM_FINGERPRINT = "the good run's fingerprint"


class ClaimKey(NamedTuple):
    """One figure a claim may name: its unit, its direction, where a saved fingerprint keeps it."""

    unit: str
    higher_is_better: bool
    fingerprint_field: str
    words: str


CLAIM_KEYS: dict[str, ClaimKey] = {
    "baseline": ClaimKey("tok/s", True, "baseline_tps", "baseline throughput (no speculation)"),
    "spec": ClaimKey("tok/s", True, "spec_tps", "speculative throughput"),
    "accept_len": ClaimKey("tokens", True, "accept_length", "accept length (tokens per verify)"),
    "verify_ms": ClaimKey("ms", False, "verify_ms", "verify time per cycle"),
    "draft_ms": ClaimKey("ms", False, "draft_ms", "one draft step"),
    "tpot_ms": ClaimKey("ms", False, "tpot_ms", "speculative time per output token (prefill excluded)"),
}
"""`--expect` keys. Times are per cycle (verify) or per draft step (draft), as the phase profile measures them."""


def fingerprint_claims(good: dict[str, Any] | None) -> dict[str, float]:
    """The good run's recorded measurements as claims (`measurements: {spec_tps: 83.7, accept_length: 2.77, …}`);
    only finite positive numbers count."""
    meas = good.get("measurements") if isinstance(good, dict) else None
    if not isinstance(meas, dict):
        return {}
    out: dict[str, float] = {}
    for key, info in CLAIM_KEYS.items():
        value = meas.get(info.fingerprint_field, meas.get(key))
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            out[key] = float(value)
    return out


def claims_for(expect: dict[str, float], good: dict[str, Any] | None) -> tuple[dict[str, float], str]:
    """The claims a run judges and where they came from: `--expect` when given (it wins whole: a user who quotes
    figures means those), else the good run's measurements."""
    if expect:
        return dict(expect), "--expect"
    found = fingerprint_claims(good)
    return found, (FROM_FINGERPRINT if found else "--expect")


def _samples(key: str, spec: MeasuredFact | None, phases: PhaseTimes | None) -> tuple[list[float], str]:
    """Today's per-run samples of a non-tok/s figure and what they are."""
    if key == "accept_len":
        runs = (spec.model_extra or {}).get("runs") if spec is not None else None
        vals = [float(r["accept_length"]) for r in runs or []
                if isinstance(r, dict) and isinstance(r.get("accept_length"), int | float)]
        if not vals and spec is not None and spec.accept_length is not None:
            vals = [float(spec.accept_length)]
        return vals, "accept length per benchmark run of the speculative server"
    if key == "tpot_ms":
        base = (spec.decode_samples or spec.samples) if spec is not None else []
        what = "prefill excluded" if spec is not None and spec.decode_samples else "whole requests"
        return [1000.0 / float(v) for v in base if v], f"1000 / the speculative server's tok/s per run ({what})"
    stat = getattr(phases, key, None) if phases is not None and key in PhaseTimes.model_fields else None
    if not isinstance(stat, PhaseStat):
        return [], ""
    vals = [float(v) for v in stat.samples] or [float(stat.ms)]
    return vals, f"phase profile of the running server ({stat.source or 'profiler'})"


def metric_claim(key: str, claimed: float, measure: MeasureFacts, phases: PhaseTimes | None,
                 source: str) -> ClaimFact | None:
    """One claim against today's figure, None when today has no sample of it."""
    info = CLAIM_KEYS.get(key)
    if info is None:
        return None
    if info.unit == "tok/s":
        m = getattr(measure, key, None) if key in MeasureFacts.model_fields else None
        if not isinstance(m, MeasuredFact) or not m.samples:
            return None
        out = claim_outcome(m.samples, claimed, m.decode_samples or None, (m.model_extra or {}).get("claim_runs"))
    else:
        samples, what = _samples(key, measure.spec, phases)
        if not samples:
            return None
        out = compare_to_claim(samples, claimed).model_dump()
        out.update(claimed=claimed, basis="end-to-end", measured_by=what)
        if len(samples) < 3:  # one phase figure: the comparator cannot judge it; say how far it is, undecided
            out.update(outcome="UNKNOWN", median=statistics.median(samples))
    out.update(unit=info.unit, higher_is_better=info.higher_is_better, source=source)
    return ClaimFact.model_validate(out)


def judge_claims(expect: dict[str, float], good: dict[str, Any] | None, measure: MeasureFacts,
                 phases: PhaseTimes | None) -> Claims:
    """Every claim (`--expect`, else the good run's measurements) judged against today's measurements."""
    claims, source = claims_for(expect, good)
    out: dict[str, ClaimFact] = {}
    for key, claimed in claims.items():
        judged = metric_claim(key, float(claimed), measure, phases, source)
        if judged is not None:
            out[key] = judged
    return Claims(out)


def reference_figure(metric: str, claim: ClaimFact | None, measured: MeasuredFact | None,
                     good: Any) -> tuple[float | None, str]:
    """The figure a metric is judged against, and what it is: its claim (one judged with the prefill excluded is
    converted to end-to-end by today's own ratio when both readings were measured: trials measure whole requests),
    else the good run's recorded measurement (`good`: the good fingerprint given as a dict)."""
    if claim is not None and claim.claimed is not None:
        m = measured
        if claim.basis == "decode" and m is not None and m.samples and m.decode_samples:
            # Trials measure end to end: the claim (prefill excluded) in those units, by today's own ratio.
            ratio = statistics.median(m.samples) / statistics.median(m.decode_samples)
            return round(claim.claimed * ratio, 2), "claimed, converted to end-to-end"
        return claim.claimed, ("good run" if claim.source == FROM_FINGERPRINT else "claimed")
    meas = good.get("measurements") if isinstance(good, dict) else None
    value = meas.get(f"{metric}_tps") if isinstance(meas, dict) else None
    return (float(value), "good run") if isinstance(value, int | float) else (None, "claimed")


__all__ += ["judge_claims", "reference_figure"]
