"""The "Key findings" section: findings, merged where they say the same, less those a Suspects row says."""

from __future__ import annotations

from specdoctor.report.blocks import LLM_MARK, Bullets, Ev, Para, Section, Span
from specdoctor.report.model import Finding, Report
from specdoctor.report.sections.cells import dedup_ids, ev_link

__all__ = ["findings_section"]


def findings_section(r: Report, s: Section) -> Section:
    if not r.findings:
        s.blocks.append(Para(["No findings recorded."]))
        return s
    ncmd = len(r.commands)
    items: list[list[Span]] = []
    for f in _merged_findings([f for f in r.findings if not _restates_suspect(f, r)]):
        spans: list[Span] = [f"[{f.severity}] " if f.severity != "info" else "", f.title]
        if f.detail:
            spans.append(f" — {f.detail}")
        evs = [e for ev in f.evidence for e in ev_link(ev, ncmd) if isinstance(e, Ev)]
        if evs:
            merged = Ev(evs[0].tool, evs[0].step, dedup_ids([i for e in evs for i in e.ids]),
                        tuple(c for e in evs for c in e.literal))
            spans += [" · ", merged]
        if f.llm_made:
            spans.append(f" {LLM_MARK}")
        items.append([sp for sp in spans if sp != ""])
    s.blocks.append(Bullets(items))
    return s


def _restates_suspect(f: Finding, r: Report) -> bool:
    """An info finding that only repeats a Suspects row (its path and its triage reason) adds nothing there."""
    return f.severity == "info" and not f.llm_made and any(
        x.path in f.title and x.reason and x.reason in f.title for x in r.suspects)


def _merged_findings(findings: list[Finding]) -> list[Finding]:
    """Consecutive findings that share detail, severity and evidence read as one (titles joined by '; ')."""
    out: list[Finding] = []
    for f in findings:
        prev = out[-1] if out else None
        if (prev is not None and f.detail and f.detail == prev.detail and f.severity == prev.severity
                and f.evidence == prev.evidence and f.llm_made == prev.llm_made):
            out[-1] = prev.model_copy(update={"title": f"{prev.title}; {f.title}"})
        else:
            out.append(f)
    return out
