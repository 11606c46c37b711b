"""Report parts read from a run's final state that the builder does not map yet (bisection trials, launch line).

Plain dicts in, typed models out, so the engine calls it with one line and the report layer owns the mapping.
"""

from __future__ import annotations

from typing import Any

from specdoctor.report.model import BisectTrial, Report

__all__ = ["bisection_trials", "enrich_from_state"]


def _output(values: dict[str, Any], step: str) -> dict[str, Any] | None:
    r = (values.get("results") or {}).get(step)
    return r.get("output") if isinstance(r, dict) and r.get("status") == "ok" else None


def bisection_trials(output: dict[str, Any] | None) -> list[BisectTrial]:
    """The bisect tool's trials (which patches were in, outcome, median), numbered from 1."""
    out: list[BisectTrial] = []
    for i, t in enumerate((output or {}).get("trials") or [], 1):
        if not isinstance(t, dict) or "outcome" not in t:
            continue
        out.append(BisectTrial(index=i, patches=[str(p) for p in t.get("patches") or []], outcome=str(t["outcome"]),
                               median=t.get("median"), samples=[float(x) for x in t.get("samples") or []],
                               purpose=str(t.get("purpose") or ""), cause=t.get("cause")))
    return out


def enrich_from_state(report: Report, values: dict[str, Any]) -> None:
    """Fill the optional parts the builder leaves empty; never overwrites what it set."""
    if not report.bisection:
        report.bisection = bisection_trials(_output(values, "bisect"))
    facts = values.get("facts") or {}
    launch = facts.get("launch")
    if report.meta.launch is None and isinstance(launch, str) and launch:
        report.meta.launch = launch
    site = (_output(values, "propagation") or {}).get("sitecustomize")
    if report.meta.sitecustomize is None and isinstance(site, str) and site:
        report.meta.sitecustomize = site
