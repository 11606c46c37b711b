"""The report as a neutral document (sections of paragraphs, tables, lists), rendered by md/html/rich.

Building the content once keeps the three formats in step: same sections, same order, same numbers.
The parts of a document live in `report.blocks`, each section's builder in `report.sections.<topic>`;
this module puts the sections in order and drops the columns that say nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

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
           "build", "SECTIONS", "SectionSpec", "SECTION_IDS", "LLM_MARK", "COMMAND_HEAD", "command_rows", "prune_columns"]

_records_table = records_table  # the name tests/report/test_report_fingerprint_rows.py pins the merged rows by

class SectionSpec(NamedTuple):
    """One report section: its anchor id, its heading, and the builder that fills it from the report."""

    id: str
    title: str
    build: Callable[[Report, Section], Section]


SECTIONS: tuple[SectionSpec, ...] = (
    SectionSpec('verdict', 'Verdict and what to do', verdict_section),
    SectionSpec('plan', 'Plan and cost', plan_section),
    SectionSpec('claims', 'Claims vs measured', claims_section),
    SectionSpec('attribution', 'Where the gap goes', attribution_section),
    SectionSpec('findings', 'Key findings', findings_section),
    SectionSpec('game-plan', 'Game plan', game_plan_section),
    SectionSpec('measurements', 'Measurements', measurements_section),
    SectionSpec('suspects', 'Suspects', suspects_section),
    SectionSpec('bisection', 'Bisection trials', bisection_section),
    SectionSpec('gates', 'Feature gates', gates_section),
    SectionSpec('env', 'Environment propagation', env_section),
    SectionSpec('fingerprint', 'Fingerprint', fingerprint_section),
    SectionSpec('stash', 'Subtraction in trial trees (all patches vs essentials)', stash_section),
    SectionSpec('nccl', 'NCCL sweep', nccl_section),
    SectionSpec('breakeven', 'Break-even', breakeven_section),
    SectionSpec('decisions', 'Decisions log', decisions_section),
    SectionSpec('commands', 'Appendix: commands', commands_section),
    SectionSpec('meta', 'Run metadata', meta_section),
)
"""Every section of every report, in order: the one place a new section is listed (`specdoctor report --section`
takes these ids; markdown, HTML and the terminal render the same list)."""

SECTION_IDS = [spec.id for spec in SECTIONS]


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
    sections = [spec.build(report, Section(spec.id, spec.title)) for spec in SECTIONS]
    for sec in sections:
        sec.blocks = _prune(sec.blocks)
    host = report.meta.host or "unknown host"
    sub = f"run {report.meta.run_id or fmt.DASH} · {host} · {fmt.when(report.meta.started)}"
    return Document(title=f"specdoctor report: {report.verdict}", subtitle=sub, sections=sections,
                    commands=list(report.commands))
