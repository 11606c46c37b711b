"""The "Game plan" section: every proposed action, measured gains first, with its command."""

from __future__ import annotations

from specdoctor.report import derive, fmt
from specdoctor.report.blocks import LLM_MARK, Code, Para, Section, Table
from specdoctor.report.model import Report
from specdoctor.report.sections.cells import gain_text, table_row

__all__ = ["game_plan_section"]


def game_plan_section(r: Report, s: Section) -> Section:
    if not r.game_plan:
        s.blocks.append(Para(["No actions proposed."]))
        return s
    rows = []
    for i, a in enumerate(derive.ranked_actions(r), 1):
        title = a.title + (f" {LLM_MARK}" if a.llm_made else "")
        cmd = derive.action_command(a, r)
        rows.append(table_row(str(i), title, gain_text(a), a.basis, a.cost or fmt.DASH, a.risk or fmt.DASH,
                              a.detail or fmt.DASH, [Code(cmd)] if cmd else fmt.DASH))
    s.blocks.append(Table(["#", "action", "expected gain", "basis", "cost", "risk", "detail", "command"], rows))
    return s
