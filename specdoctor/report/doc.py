"""The report as a neutral document (sections of paragraphs, tables, lists), rendered by md/html/rich.

Building the content once keeps the three formats in step: same sections, same order, same numbers.
The parts of a document live in `report.blocks`, each section's builder in `report.sections.<topic>`;
this module puts the sections in order and drops the columns that say nothing.
"""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import (
    LLM_MARK,
    Block,
    Bullets,
    Code,
    Details,
    Document,
    Ev,
    Figure,
    Para,
    Quote,
    Section,
    Span,
    Table,
)
from specdoctor.report.model import Report
from specdoctor.report.sections.breakeven import breakeven_section
from specdoctor.report.sections.cells import is_empty
from specdoctor.report.sections.claims import attribution_section, claims_section
from specdoctor.report.sections.env import env_section
from specdoctor.report.sections.findings import findings_section
from specdoctor.report.sections.fingerprint import fingerprint_section, records_table
from specdoctor.report.sections.game_plan import game_plan_section
from specdoctor.report.sections.measurements import bisection_section, measurements_section
from specdoctor.report.sections.nccl import nccl_section
from specdoctor.report.sections.plan import plan_section
from specdoctor.report.sections.run_log import (
    COMMAND_HEAD,
    command_rows,
    commands_section,
    decisions_section,
    meta_section,
)
from specdoctor.report.sections.stash import stash_section
from specdoctor.report.sections.suspects import gates_section, suspects_section
from specdoctor.report.sections.verdict import verdict_section

__all__ = ["Code", "Ev", "Span", "Para", "Table", "Bullets", "Quote", "Figure", "Details", "Block", "Section", "Document",
           "build", "SECTION_IDS", "LLM_MARK", "COMMAND_HEAD", "command_rows", "prune_columns"]

_records_table = records_table  # the name tests/report/test_report_fingerprint_rows.py pins the merged rows by

SECTION_IDS = ["verdict", "plan", "claims", "attribution", "findings", "game-plan", "measurements", "suspects", "bisection",
               "gates", "env", "fingerprint", "stash", "nccl", "breakeven", "decisions", "commands", "meta"]

_BUILDERS = [verdict_section, plan_section, claims_section, attribution_section, findings_section, game_plan_section,
             measurements_section, suspects_section, bisection_section, gates_section, env_section, fingerprint_section,
             stash_section, nccl_section, breakeven_section, decisions_section, commands_section, meta_section]


def prune_columns(t: Table) -> Table:
    """Drop columns (but the first) whose every cell is empty or a dash: an empty column says nothing."""
    if not t.rows:
        return t
    keep = [0] + [j for j in range(1, len(t.headers)) if not all(is_empty(row[j]) for row in t.rows if j < len(row))]
    return Table([t.headers[j] for j in keep], [[row[j] for j in keep] for row in t.rows], t.caption)


def _prune(blocks: list[Block]) -> list[Block]:
    out: list[Block] = []
    for b in blocks:
        if isinstance(b, Table):
            out.append(prune_columns(b))
        elif isinstance(b, Details):
            out.append(Details(b.summary, _prune(b.blocks), _prune(b.md_short)))
        else:
            out.append(b)
    return out


def build(report: Report) -> Document:
    """The document for a report: every section, always, in `SECTION_IDS` order."""
    sections = [b(report) for b in _BUILDERS]
    assert [s.id for s in sections] == SECTION_IDS
    for sec in sections:
        sec.blocks = _prune(sec.blocks)
    host = report.meta.host or "unknown host"
    sub = f"run {report.meta.run_id or fmt.DASH} · {host} · {fmt.when(report.meta.started)}"
    return Document(title=f"specdoctor report: {report.verdict}", subtitle=sub, sections=sections,
                    commands=list(report.commands))
