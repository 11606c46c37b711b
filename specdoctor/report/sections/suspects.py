"""The changed code: "Suspects" (every changed file's triage) and "Feature gates" (env-var gates it reads)."""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import Code, Para, Section, Span, Table
from specdoctor.report.model import Report
from specdoctor.report.sections.cells import table_row, union_link

__all__ = ["suspects_section", "gates_section"]


def suspects_section(r: Report, s: Section) -> Section:
    if not r.suspects:
        s.blocks.append(Para(["No changed files."]))
        return s
    rows = []
    for x in r.suspects:
        path_cell: list[Span] = [Code(x.path)]
        if x.logging_only:
            path_cell.append(" (logging only)")
        rows.append(table_row(path_cell, x.subsystem or fmt.DASH, fmt.yesno(x.on_hot_path, "on", "off"),
                              x.reason or fmt.DASH, [Code(x.gated)] if x.gated else "no",
                              x.bisection or fmt.DASH))
    s.blocks.append(Table(["file", "subsystem", "hot path", "why", "gated", "bisection"], rows))
    link = union_link([x.evidence for x in r.suspects], len(r.commands))
    if link:
        s.blocks.append(Para(["Triage of every file: ", *link]))
    return s


def gates_section(r: Report, s: Section) -> Section:
    if not r.gates:
        s.blocks.append(Para(["No env-var gates found in the added code."]))
        return s
    rows = []
    for g in r.gates:
        vals = _group_values(g.values)
        rows.append(table_row([Code(g.name)], fmt.value(g.default), [Code(g.reader)] if g.reader else fmt.DASH,
                              [Code(g.file)] if g.file else fmt.DASH, g.state or fmt.DASH, vals))
    s.blocks.append(Table(["gate", "default", "reader", "file", "state", "values per process"], rows))
    link = union_link([g.evidence for g in r.gates], len(r.commands))
    if link:
        s.blocks.append(Para(["Values read from every server process: ", *link]))
    return s


def _group_values(values: dict[str, str | None]) -> str:
    """'(unset) in 8 processes' instead of eight identical columns; distinct values listed."""
    if not values:
        return fmt.DASH
    groups: dict[str, list[str]] = {}
    for proc, v in values.items():
        groups.setdefault(fmt.value(v), []).append(proc)
    return "; ".join(f"{v} in {len(p)} ({', '.join(p)})" if len(p) <= 3 else f"{v} in {len(p)} processes"
                     for v, p in groups.items())
