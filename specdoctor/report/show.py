"""Terminal rendering (rich renderables, never printed here) of a saved report and of a report diff."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group, RenderableType
from rich.pager import Pager
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from specdoctor.host.redact import redact_text
from specdoctor.report import fmt
from specdoctor.report.diff import ReportDiff
from specdoctor.report.doc import (
    LLM_MARK,
    Block,
    Bullets,
    Code,
    Details,
    Ev,
    Figure,
    Para,
    Quote,
    Span,
    Table,
    build,
)
from specdoctor.report.model import Report

__all__ = ["render_report", "render_diff", "print_report", "terminal_console", "VERDICT_STYLE", "MAX_WIDTH"]

VERDICT_STYLE = {"no-regression": "bold green", "code-regression": "bold red", "environment": "bold yellow",
                 "baseline-not-reproducible": "bold magenta", "inconclusive": "bold white"}


MAX_WIDTH = 100
_WIDE = 5      # tables with more columns than this are shown as one record per row
_LONG_CODE = 40    # …and so are tables holding a command longer than this (a cell would cut it)


def _ev_text(e: Ev) -> str:
    n = len(e.ids) + len(e.literal)
    where = f", step {e.step}" if e.step else ""
    return f"evidence: {n} command{'s' if n != 1 else ''}{where} (commands.md)" if n else f"evidence{where}"


def _text(spans: list[Span]) -> Text:
    t = Text()
    for s in spans:
        if isinstance(s, Code):
            t.append(redact_text(s.text), style="cyan")
        elif isinstance(s, Ev):
            t.append(_ev_text(s), style="dim")
        else:
            s = redact_text(s)
            if LLM_MARK in s:
                before, _, after = s.partition(LLM_MARK)
                t.append(before)
                t.append(LLM_MARK, style="bold magenta")
                t.append(after)
            else:
                t.append(s)
    return t


def _records(b: Table) -> RenderableType:
    """A wide table as one short record per row, so it fits a 100-column terminal without squeezing."""
    parts: list[RenderableType] = [Text(b.caption, style="dim")] if b.caption else []
    for row in b.rows:
        parts.append(Text.assemble((f"{b.headers[0]} ", "dim"), _text(row[0]), style="bold"))
        for head, cell in zip(b.headers[1:], row[1:], strict=False):
            if _blank(cell):
                continue
            label = "" if any(isinstance(sp, Ev) for sp in cell) else head + ": "   # an Ev says 'evidence:' itself
            t = Text.assemble(("  " + label, "dim"), _text(cell))
            t.overflow = "fold"                       # commands stay whole: folded, never cut with '…'
            parts.append(t)
    return Group(*parts)


def _blank(cell: list[Span]) -> bool:
    return all(isinstance(sp, str) and sp.strip() in ("", fmt.DASH) for sp in cell)


def _has_long_code(b: Table) -> bool:
    return any(isinstance(sp, Code) and len(sp.text) > _LONG_CODE for row in b.rows for cell in row for sp in cell)


def _block(b: Block, verdict: str) -> RenderableType | None:
    if isinstance(b, Para):
        t = _text(b.spans)
        if b.strong:
            t.stylize(VERDICT_STYLE.get(verdict, "bold"))
        if b.llm_made:
            t = Text.assemble((LLM_MARK + " ", "bold magenta"), t)
        return t
    if isinstance(b, Table):
        if len(b.headers) > _WIDE or _has_long_code(b):
            return _records(b)
        table = RichTable(*b.headers, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                          title=b.caption or None, title_justify="left", title_style="dim")
        for row in b.rows:
            cells = [_text(c) for c in row]
            for t in cells:
                t.overflow = "fold"  # a hash or path longer than its column is folded, never cut with '…'
            table.add_row(*cells)
        return table
    if isinstance(b, Bullets):
        return Group(*(Text.assemble("• ", _text(i)) for i in b.items))
    if isinstance(b, Quote):
        return Panel(Text("\n".join(redact_text(line) for line in b.lines), style="yellow"), expand=False)
    if isinstance(b, Figure):
        return Text(f"(figure: {b.caption} — {b.key}.png beside report.md)", style="dim")
    if isinstance(b, Details):
        inner = [r for r in (_block(x, verdict) for x in b.md_short) if r is not None]
        return Group(*inner) if inner else Text(f"({b.summary}: in report.html)", style="dim")
    raise TypeError(f"unknown block {type(b).__name__}")


def render_report(report: Report, sections: list[str] | None = None) -> Group:
    """The report for a terminal; `sections` limits it to those section ids (see doc.SECTION_IDS)."""
    doc = build(report)
    parts: list[RenderableType] = [Text(doc.title, style="bold"), Text(redact_text(doc.subtitle), style="dim")]
    for sec in doc.sections:
        if sections and sec.id not in sections:
            continue
        parts.append(Rule(sec.title, align="left"))
        parts += [r for r in (_block(b, report.verdict) for b in sec.blocks) if r is not None]
    return Group(*parts)


def terminal_console(console: Console | None = None) -> Console:
    """A console at most 100 columns wide (narrower terminals keep their width)."""
    base = console or Console()
    return Console(width=min(base.width, MAX_WIDTH), height=base.height, force_terminal=base.is_terminal or None,
                   file=base.file)


def print_report(report: Report, sections: list[str] | None = None, console: Console | None = None,
                 pager: Pager | None = None) -> None:
    """Print the report at ≤100 columns; on a terminal, output longer than the screen goes through a pager."""
    con = terminal_console(console)
    group = render_report(report, sections)
    if con.is_terminal:
        with con.capture() as cap:
            con.print(group)
        text = cap.get()
        if text.count("\n") > con.height:
            with con.pager(pager=pager, styles=True):
                con.print(group)
            return
        con.file.write(text)
        return
    con.print(group)


def render_diff(d: ReportDiff) -> Group:
    """A diff of two runs: verdicts, measurements with comparator outcomes, fingerprint changes."""
    head = Text.assemble(("run A ", "dim"), d.run_a or fmt.DASH, ("  →  run B ", "dim"), d.run_b or fmt.DASH)
    verdict = Text.assemble("verdict: ", (d.verdict_a, VERDICT_STYLE[d.verdict_a]), " → ",
                            (d.verdict_b, VERDICT_STYLE[d.verdict_b]),
                            (" (changed)" if d.verdict_changed else " (unchanged)", "dim"))
    parts: list[RenderableType] = [head, verdict, Rule("Measurements", align="left")]
    if d.measurements:
        t = RichTable("configuration", "A median", "B median", "change", "outcome", "p", "why", box=box.SIMPLE_HEAD)
        style = {"DIFFERENT": "bold red", "SAME": "green", "UNKNOWN": "yellow"}
        for m in d.measurements:
            t.add_row(m.label, fmt.num(m.median_a, unit=m.unit), fmt.num(m.median_b, unit=m.unit),
                      fmt.pct(m.pct_change), Text(m.outcome, style=style[m.outcome]), fmt.pval(m.p_value), m.reason)
        parts.append(t)
    else:
        parts.append(Text("No configuration was measured in both runs."))
    for name, labels in (("only in A", d.only_in_a), ("only in B", d.only_in_b)):
        if labels:
            parts.append(Text(f"{name}: {', '.join(labels)}", style="dim"))
    parts.append(Rule("Fingerprint", align="left"))
    if d.fingerprint:
        t = RichTable("key", "A", "B", "impact", box=box.SIMPLE_HEAD)
        for c in d.fingerprint:
            t.add_row(c.key, redact_text(fmt.value(c.before)), redact_text(fmt.value(c.after)), c.impact)
        parts.append(t)
    else:
        parts.append(Text("Fingerprints identical (or not recorded)."))
    if d.top_action_a != d.top_action_b:
        parts.append(Rule("Game plan", align="left"))
        parts.append(Text(f"top action A: {d.top_action_a or fmt.DASH}\ntop action B: {d.top_action_b or fmt.DASH}"))
    return Group(*parts)
