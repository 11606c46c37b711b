"""Compare two saved reports: verdicts, measurements (through the comparator) and fingerprints, ranked by impact.

Identity noise (process ids, ports of trial servers, timestamps) is not a difference; neither is `2617` vs `2617.0`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.report.model import Action, FingerprintChange, Measurement, Report, Verdict
from specdoctor.stats.comparator import Outcome, compare

__all__ = ["MeasurementDiff", "ReportDiff", "diff_reports", "flatten", "is_identity", "same_value"]

_HIGH = ("nccl", "driver", "cuda", "topology", "pcie", "p2p", "clock", "torch", "sglang", "power", "worker_env",
         "persistence", "version")
_MEDIUM = ("gpu", "env", "python", "commit", "head", "process")


class MeasurementDiff(BaseModel):
    """One configuration measured in both runs, judged by the Pinpoint-style comparator (A → B)."""

    label: str
    metric: str
    unit: str
    n_a: int
    n_b: int
    median_a: float | None = None
    median_b: float | None = None
    pct_change: float | None = None
    outcome: Outcome = "UNKNOWN"
    p_value: float | None = None
    reason: str = ""


class ReportDiff(BaseModel):
    """What changed between run A and run B."""

    run_a: str | None = None
    run_b: str | None = None
    verdict_a: Verdict
    verdict_b: Verdict
    confidence_a: float | None = None
    confidence_b: float | None = None
    measurements: list[MeasurementDiff] = Field(default_factory=list, description="DIFFERENT first, by |change|.")
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(default_factory=list)
    fingerprint: list[FingerprintChange] = Field(default_factory=list,
                                                 description="By impact, then relative size; identity noise left out.")
    top_action_a: str | None = None
    top_action_b: str | None = None

    @property
    def verdict_changed(self) -> bool:
        return self.verdict_a != self.verdict_b

    def summary_line(self) -> str:
        changed = sum(m.outcome == "DIFFERENT" for m in self.measurements)
        v = f"{self.verdict_a} -> {self.verdict_b}" if self.verdict_changed else f"verdict unchanged ({self.verdict_a})"
        return f"{v}; {changed}/{len(self.measurements)} measurements DIFFERENT; {len(self.fingerprint)} fingerprint changes"


# Last key components that identify a process, a trial server or a moment, not the box's configuration.
_IDENTITY = re.compile(r"^(pid|ppid|pgid|port|.*_port|time|.*_time|timestamp|started|finished|date|run_id|"
                       r"used_mib|uptime.*|boot_id|hostname_pid)$", re.I)
_RECORD_KEYS = ("index", "name", "key", "rank")


def _record_key(rec: dict[str, Any], pos: int) -> str:
    """A stable key for a record in a list: its index/name when it has one (pids change, positions shift)."""
    for k in _RECORD_KEYS:
        if k in rec and _scalar(rec[k]):
            return str(rec[k])
    return str(pos)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, str | None]:
    """Nested fingerprint dicts as dotted keys with string values, so any two can be compared key by key."""
    out: dict[str, str | None] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, rec in enumerate(v):
                out.update(flatten(rec, f"{key}[{_record_key(rec, i)}]."))
        elif isinstance(v, list):
            out[key] = ", ".join(str(x) for x in v)
        else:
            out[key] = None if v is None else str(v)
    return out


def is_identity(key: str) -> bool:
    """Whether a flattened key names identity noise (a pid, a trial server's port, a timestamp)."""
    last = key.rsplit(".", 1)[-1]
    return bool(_IDENTITY.match(last))


def _number(v: str | None) -> float | None:
    try:
        return None if v is None else float(v)
    except ValueError:
        return None


def same_value(a: str | None, b: str | None) -> bool:
    """Equal as typed values: '2617' and '2617.0' are the same number."""
    if a == b:
        return True
    x, y = _number(a), _number(b)
    return x is not None and y is not None and x == y


def _magnitude(c: FingerprintChange) -> float:
    """Relative size of a numeric change (1.0 for a non-numeric or added/removed value)."""
    x, y = _number(c.before), _number(c.after)
    if x is None or y is None:
        return 1.0
    return abs(y - x) / max(abs(x), abs(y), 1e-9)


def _impact(key: str) -> str:
    k = key.lower()
    return "high" if any(w in k for w in _HIGH) else "medium" if any(w in k for w in _MEDIUM) else "low"


def _measure_diff(a: Measurement, b: Measurement) -> MeasurementDiff:
    d = MeasurementDiff(label=a.label, metric=a.metric, unit=a.unit, n_a=len(a.samples), n_b=len(b.samples),
                        median_a=a.median, median_b=b.median)
    if a.median is not None and b.median is not None and a.median:
        d.pct_change = round(100.0 * (b.median - a.median) / a.median, 2)
    if not a.samples or not b.samples:
        d.reason = "no per-run samples on one side"
        return d
    c = compare(a.samples, b.samples, unit=a.unit, higher_is_better=a.unit not in ("ms", "us", "µs", "s"))
    d.outcome, d.p_value, d.reason, d.pct_change = c.outcome, c.p_value, c.reason, round(c.pct_change, 2)
    d.median_a, d.median_b = c.median_a, c.median_b
    return d


def _all_measurements(r: Report) -> dict[tuple[str, str], Measurement]:
    ms = list(r.measurements) + (list(r.stash.measurements) if r.stash else [])
    return {(m.label, m.metric): m for m in ms}


def _top(actions: list[Action]) -> str | None:
    """The first action as the report shows it (see derive.ranked_actions)."""
    ranked = sorted(actions, key=lambda a: a.basis != "measured")
    return ranked[0].title if ranked else None


def diff_reports(a: Report, b: Report) -> ReportDiff:
    """Run A against run B: matching configurations compared, fingerprints diffed key by key."""
    ma, mb = _all_measurements(a), _all_measurements(b)
    fa = flatten(a.fingerprint.current) if a.fingerprint else {}
    fb = flatten(b.fingerprint.current) if b.fingerprint else {}
    changes = [FingerprintChange(key=k, before=fa.get(k), after=fb.get(k), impact=_impact(k))  # type: ignore[arg-type]
               for k in sorted(fa.keys() | fb.keys())
               if not is_identity(k) and not same_value(fa.get(k), fb.get(k))]
    order = {"high": 0, "medium": 1, "low": 2}
    changes.sort(key=lambda c: (order[c.impact], -_magnitude(c), c.key))
    rank = {"DIFFERENT": 0, "UNKNOWN": 1, "SAME": 2}
    measured = sorted((_measure_diff(ma[k], mb[k]) for k in ma if k in mb),
                      key=lambda m: (rank[m.outcome], -abs(m.pct_change or 0.0)))
    return ReportDiff(
        run_a=a.meta.run_id, run_b=b.meta.run_id, verdict_a=a.verdict, verdict_b=b.verdict,
        confidence_a=a.confidence, confidence_b=b.confidence,
        measurements=measured,
        only_in_a=[k[0] for k in ma if k not in mb], only_in_b=[k[0] for k in mb if k not in ma],
        fingerprint=changes, top_action_a=_top(a.game_plan), top_action_b=_top(b.game_plan))
