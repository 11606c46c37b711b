"""What the section builders share: table rows of spans, evidence links, intervals, and what counts as empty."""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import Code, Ev, Para, Span
from specdoctor.report.model import Action, Evidence

__all__ = ["NOT_RUN", "table_row", "dedup_ids", "ev_link", "union_link", "ci_text", "gain_text", "span_text",
           "is_empty"]

NOT_RUN = Para(["Not run in this investigation."])


def table_row(*cells: object) -> list[list[Span]]:
    """One table row: a list of spans is a cell as is, a Code/Ev is a one-span cell, anything else its str()."""
    out: list[list[Span]] = []
    for c in cells:
        if isinstance(c, list):
            out.append(c)
        elif isinstance(c, (Code, Ev)):
            out.append([c])
        else:
            out.append([str(c)])
    return out


def dedup_ids(ids: list[int]) -> tuple[int, ...]:
    """Command ids once each, in log order."""
    return tuple(sorted(set(ids)))


def ev_link(ev: Evidence | None, cmd_count: int = 0) -> list[Span]:
    """Evidence as one link span (tool, step, the de-duplicated commands); a dash when there is none."""
    if ev is None or not (ev.tool or ev.step or ev.command_ids or ev.commands):
        return [fmt.DASH]
    ids = tuple(i for i in dedup_ids(ev.command_ids) if not cmd_count or i < cmd_count)
    return [Ev(ev.tool, ev.step, ids, tuple(ev.commands))]


def union_link(evs: list[Evidence | None], cmd_count: int) -> list[Span]:
    """One evidence link for many items that share their source (e.g. every row of a table), commands once each."""
    got = [e for e in evs if e is not None and (e.command_ids or e.commands)]
    if not got:
        return []
    ids = tuple(i for i in dedup_ids([i for e in got for i in e.command_ids]) if not cmd_count or i < cmd_count)
    return [Ev(got[0].tool, got[0].step, ids, tuple(dict.fromkeys(c for e in got for c in e.commands)))]


def ci_text(low: float | None, high: float | None) -> str:
    return fmt.DASH if low is None or high is None else f"[{fmt.num(low)}, {fmt.num(high)}]"


def gain_text(a: Action) -> str:
    """The gain; a modelled one with its range; measured and modelled side by side when a trial measured the lever."""
    if a.gain is None:
        return fmt.DASH
    text = f"{a.gain:+.1f} tok/s" if a.gain_unit == "tok/s" else fmt.pct(a.gain)
    if a.gain_low is not None and a.gain_high is not None and a.basis == "modelled":
        text += f" [{a.gain_low:+.1f}, {a.gain_high:+.1f}]"
    if a.measured_gain is not None and a.modelled_gain is not None:
        text += f" (measured {a.measured_gain:+.1f}, modelled {a.modelled_gain:+.1f})"
    return text


def span_text(sp: Span) -> str:
    return sp.text if isinstance(sp, Code) else "" if isinstance(sp, Ev) and not sp.ids else str(sp)


def is_empty(cell: list[Span]) -> bool:
    return all((span_text(sp).strip() in ("", fmt.DASH)) and not (isinstance(sp, Ev) and (sp.ids or sp.literal))
               for sp in cell)
