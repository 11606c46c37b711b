"""How the run went: "Decisions log", "Appendix: commands" and "Run metadata"."""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import LLM_MARK, Code, Details, Ev, Para, Section, Span, Table
from specdoctor.report.model import Report
from specdoctor.report.sections.cells import dedup_ids, is_empty, span_text, table_row

__all__ = ["decisions_section", "commands_section", "meta_section", "command_rows", "COMMAND_HEAD"]


def decisions_section(r: Report, s: Section) -> Section:
    if not r.decisions:
        s.blocks.append(Para(["No steps ran."]))
        return s
    ncmd = len(r.commands)
    rows = [table_row(str(i), [Code(d.step)], [Code(d.tool)] if d.tool else fmt.DASH, d.status, d.checked or fmt.DASH,
                      d.found or fmt.DASH, d.decided or fmt.DASH, (d.why or fmt.DASH) + (f" {LLM_MARK}" if d.llm_made else ""),
                      [Ev(d.tool, d.step, tuple(i for i in dedup_ids(d.command_ids) if i < ncmd))]
                      if d.command_ids else fmt.DASH)
            for i, d in enumerate(r.decisions, 1)]
    s.blocks.append(Table(["#", "step", "tool", "status", "checked", "found", "decided", "why", "evidence"], rows))
    return s


def command_rows(r: Report, ids: list[int] | None = None) -> list[list[list[Span]]]:
    """Rows of the command log (all, or the given ids): what ran, where, exit status and time taken."""
    pick = range(len(r.commands)) if ids is None else ids
    rows = []
    for i in pick:
        c = r.commands[i]
        rows.append(table_row(str(i), fmt.when(c.time), [Code(c.command)], [Code(c.cwd)] if c.cwd else fmt.DASH,
                              fmt.DASH if c.exit is None else str(c.exit), fmt.seconds(c.seconds), c.note or ""))
    return rows


COMMAND_HEAD = ["#", "time", "command", "cwd", "exit", "took", "note"]


def commands_section(r: Report, s: Section) -> Section:
    if not r.commands:
        s.blocks.append(Para(["No commands were run."]))
        return s
    hosts = sorted({c.host for c in r.commands})
    failed = sum(1 for c in r.commands if c.exit not in (0, None))
    head = Para([f"{len(r.commands)} commands on {', '.join(hosts)}; {failed} exited non-zero. "
                 "The full log with every command's output is in ", Code("commands.md"), " and ",
                 Code("audit.jsonl"), " beside this report."])
    s.blocks.append(Details(f"All {len(r.commands)} commands", [Table(COMMAND_HEAD, command_rows(r))],
                            md_short=[head]))
    return s


def meta_section(r: Report, s: Section) -> Section:
    m = r.meta
    dur = fmt.seconds(m.finished - m.started) if m.started is not None and m.finished is not None else fmt.DASH
    rows = [table_row("run id", m.run_id or fmt.DASH), table_row("host", m.host or fmt.DASH),
            table_row("repository", m.repo or fmt.DASH), table_row("playbook", m.playbook or fmt.DASH),
            table_row("started", fmt.when(m.started)), table_row("finished", fmt.when(m.finished)), table_row("duration", dur),
            table_row("status", m.status), table_row("advisor", m.advisor or "rules (no LLM)"),
            table_row("specdoctor version", m.specdoctor_version or fmt.DASH),
            table_row("schema version", r.schema_version)]
    line = " · ".join(f"{row[0][0]} {span_text(row[1][0])}" for row in rows if not is_empty(row[1]))
    s.blocks.append(Details("Run details", [Table(["field", "value"], rows)], md_short=[Para([line])]))
    if m.advisor:
        s.blocks.append(Para([f"Passages marked {LLM_MARK} were written by {m.advisor}; everything else is "
                              "computed from measurements."]))
    return s
