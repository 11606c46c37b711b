"""The "Environment propagation" section: each variable in the shell, the parent and every worker."""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import Code, Para, Section, Table
from specdoctor.report.model import Report
from specdoctor.report.sections.cells import NOT_RUN, span_text, table_row, union_link

__all__ = ["env_section"]


def env_section(r: Report, s: Section) -> Section:
    if not r.env_propagation:
        s.blocks.append(NOT_RUN)
        return s
    ranks = sorted({k for row in r.env_propagation for k in row.workers}, key=lambda k: (len(k), k))
    rows = []
    for e in r.env_propagation:
        src = ", ".join(n for n, b in (("forced by the engine", e.forced_by_engine), ("sitecustomize", e.from_sitecustomize),
                                       ("nccl.conf", e.from_nccl_conf)) if b) or fmt.DASH
        vals = [fmt.value(e.workers.get(k)) for k in ranks]
        rows.append(table_row([Code(e.name)], fmt.value(e.shell), fmt.value(e.parent), *vals, src, e.status or fmt.DASH))
    n = len(ranks)
    uniform = n > 1 and all(len({span_text(c[0]) for c in row[3:3 + n]}) == 1 for row in rows)
    if uniform:     # every rank agrees on every variable: one column says it
        rows = [row[:3] + [row[3]] + row[3 + n:] for row in rows]
        heads = [f"all {n} workers ({ranks[0]}–{ranks[-1]})"]
    else:
        heads = [f"rank {k}" for k in ranks]
    s.blocks.append(Table(["variable", "shell", "parent", *heads, "source", "status"], rows))
    link = union_link([e.evidence for e in r.env_propagation], len(r.commands))
    if link:
        s.blocks.append(Para(["Read from /proc of the parent and every worker: ", *link]))
    return s
