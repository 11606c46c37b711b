"""The report as a neutral document (sections of paragraphs, tables, lists), rendered by md/html/rich.

Building the content once keeps the three formats in step: same sections, same order, same numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from specdoctor.host.audit import AuditEntry
from specdoctor.report import derive, fmt
from specdoctor.report.box_line import box_left, plan_vs_actual
from specdoctor.report.model import (
    Action,
    Attribution,
    Cause,
    Evidence,
    Finding,
    Measurement,
    MetricComparison,
    NcclRow,
    Report,
    confidence_label,
)

__all__ = ["Code", "Ev", "Span", "Para", "Table", "Bullets", "Quote", "Figure", "Details", "Block", "Section", "Document",
           "build", "SECTION_IDS", "LLM_MARK"]

LLM_MARK = "[LLM-made]"


@dataclass(frozen=True)
class Code:
    """Inline code (commands, paths, variable names)."""

    text: str


@dataclass(frozen=True)
class Ev:
    """A link to the evidence behind a claim: which tool/step, and the commands (ids into Report.commands)."""

    tool: str | None
    step: str | None
    ids: tuple[int, ...]
    literal: tuple[str, ...] = ()


Span = str | Code | Ev


@dataclass
class Para:
    spans: list[Span]
    llm_made: bool = False
    strong: bool = False
    role: str = ""


@dataclass
class Table:
    headers: list[str]
    rows: list[list[list[Span]]]
    caption: str = ""


@dataclass
class Bullets:
    items: list[list[Span]]


@dataclass
class Quote:
    """Verbatim lines (patch-script output, stdout tails)."""

    lines: list[str]


@dataclass
class Figure:
    """A plot slot (`key` picks the plot); markdown links the PNG next to it, HTML embeds it."""

    key: str
    caption: str


@dataclass
class Details:
    """Blocks a reader opens on demand (HTML: <details>; markdown: shown in `md_short` form or dropped)."""

    summary: str
    blocks: list[Block]
    md_short: list[Block] = field(default_factory=list)


Block = Para | Table | Bullets | Quote | Figure | Details


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section]
    commands: list[AuditEntry] = field(default_factory=list)


SECTION_IDS = ["verdict", "plan", "claims", "attribution", "findings", "game-plan", "measurements", "suspects", "bisection",
               "gates", "env", "fingerprint", "stash", "nccl", "breakeven", "decisions", "commands", "meta"]

_NOT_RUN = Para(["Not run in this investigation."])


def _cells(*cells: object) -> list[list[Span]]:
    out: list[list[Span]] = []
    for c in cells:
        if isinstance(c, list):
            out.append(c)
        elif isinstance(c, (Code, Ev)):
            out.append([c])
        else:
            out.append([str(c)])
    return out


def _dedup(ids: list[int]) -> tuple[int, ...]:
    """Command ids once each, in log order."""
    return tuple(sorted(set(ids)))


def _ev(ev: Evidence | None, cmd_count: int = 0) -> list[Span]:
    """Evidence as one link span (tool, step, the de-duplicated commands); a dash when there is none."""
    if ev is None or not (ev.tool or ev.step or ev.command_ids or ev.commands):
        return [fmt.DASH]
    ids = tuple(i for i in _dedup(ev.command_ids) if not cmd_count or i < cmd_count)
    return [Ev(ev.tool, ev.step, ids, tuple(ev.commands))]


def _union(evs: list[Evidence | None], cmd_count: int) -> list[Span]:
    """One evidence link for many items that share their source (e.g. every row of a table), commands once each."""
    got = [e for e in evs if e is not None and (e.command_ids or e.commands)]
    if not got:
        return []
    ids = tuple(i for i in _dedup([i for e in got for i in e.command_ids]) if not cmd_count or i < cmd_count)
    return [Ev(got[0].tool, got[0].step, ids, tuple(dict.fromkeys(c for e in got for c in e.commands)))]


def _ci(low: float | None, high: float | None) -> str:
    return fmt.DASH if low is None or high is None else f"[{fmt.num(low)}, {fmt.num(high)}]"


def _gain(a: Action) -> str:
    if a.gain is None:
        return fmt.DASH
    return f"{a.gain:+.1f} tok/s" if a.gain_unit == "tok/s" else fmt.pct(a.gain)


def _claim_words(c: MetricComparison) -> str:
    return (f"{c.metric}: claimed {fmt.num(c.claimed)}, measured {fmt.num(c.median)} {c.unit} "
            f"({fmt.pct(c.pct_change)}{', prefill excluded' if c.basis == 'decode' else ''})")


def _verdict(r: Report) -> Section:
    s = Section("verdict", "Verdict and what to do")
    conf = "" if r.confidence is None else f" · confidence {confidence_label(r.confidence)} ({r.confidence:.2f})"
    s.blocks.append(Para([Code(r.verdict), conf], strong=True))
    if r.summary:
        s.blocks.append(Para([r.summary], llm_made=r.summary_llm_made))
    missed = derive.not_reproduced(r)
    if r.verdict == "baseline-not-reproducible":
        what = "; ".join(_claim_words(c) for c in missed) or "the claimed figures"
        s.blocks.append(Para([f"Not reproduced on this box today: {what}. The verdict is about these claimed "
                              "figures (not the non-speculative baseline server): no difference that was reverted and "
                              "measured explains them."], role="note"))
    att = derive.attribution(r)
    if att is not None:
        claim = next((c for c in r.claims if c.metric == att.metric), None)
        link = _union([derive.claim_evidence(claim, r)], len(r.commands)) if claim else []
        s.blocks.append(Para(_gap_spans(att, r) + ([" ", *link] if link else []), role="gap"))
    actions = derive.ranked_actions(r)[:3]
    if actions:
        rows = []
        for i, a in enumerate(actions, 1):
            cmd = derive.action_command(a, r)
            rows.append(_cells(str(i), a.title + (f" {LLM_MARK}" if a.llm_made else ""), _gain(a), a.basis,
                               [Code(cmd)] if cmd else "no single command: see the game plan"))
        s.blocks.append(Table(["#", "top action (measured first)", "expected gain", "basis", "command"], rows))
    cost = plan_vs_actual(r)
    if cost:
        s.blocks.append(Para([cost[:1].upper() + cost[1:] + " (see Plan and cost)."], role="plan"))
    if r.verdict != "plan-only":  # a dry run changed nothing, so there is nothing to prove
        box = box_left(r)
        mark = {True: "✓ ", False: "✗ ", None: "• "}[box.ok]
        s.blocks.append(Para([mark + box.text[:1].upper() + box.text[1:] + "."], role="box"))
    if r.meta.status != "complete":
        note = f"This report is {r.meta.status}"
        s.blocks.append(Para([note + (f": {r.meta.error}" if r.meta.error else ".")]))
    return s


def _plan(r: Report) -> Section:
    s = Section("plan", "Plan and cost")
    spans: list[Span] = []
    if r.plan is None:
        spans.append("No launch plan was computed (no running server to time a launch from).")
    else:
        steps = ", ".join(f"{p.step} {p.launches}" + (f" ({p.condition})" if p.condition else "")
                          for p in r.plan.phases)
        spans.append(r.plan.text[:1].upper() + r.plan.text[1:] + "." + (f" At most, per step: {steps}." if steps
                                                                         else ""))
    made = r.launches_made
    if made is not None and r.verdict != "plan-only":
        spans.append(f" Actual: {made} launch{'es' if made != 1 else ''} made (every server this run started, a "
                     "restart of yours included).")
    s.blocks.append(Para(spans))
    if r.dry_run:
        s.blocks.append(Para(["Dry run: the steps below were not run; each lists the commands a real run would "
                              "execute (PORT is picked at launch; a command marked 'after …' needs that result "
                              "first)."], role="note"))
        for p in r.dry_run:  # one list per step: its line first, then its commands (short report.md)
            items: list[list[Span]] = [[Code(p.step), f" — {p.target} ({p.effect}); {p.condition or 'always runs'}; "
                                        f"{p.why}"]]
            for c in p.commands:
                item: list[Span] = [Code(c.command)]
                item += [f" (after {c.after})"] if not c.known and c.after else []
                item += [f" — {c.note}"] if c.note else []
                items.append(item)
            s.blocks.append(Bullets(items))
    return s


def _gap_spans(att: Attribution, r: Report) -> list[Span]:
    confirmed = [c for c in att.in_unit() if c.confirmed]
    spans: list[Span] = [f"Measured gap ({att.metric}): {fmt.num(att.reference)} {att.reference_label} → "
                         f"{fmt.num(att.measured)} {att.unit} measured = {att.gap:+.1f} {att.unit}. "]
    if confirmed:
        parts = [f"{c.name} {c.delta:+.1f} {_ci(c.ci_low, c.ci_high)}{_phase(c)}" for c in confirmed]
        spans.append("Explained by " + "; ".join(parts) + f"; {_rest_words(att, r)}.")
    else:
        spans.append(f"No cause confirmed by a trial that reverted it: {_rest_words(att, r)}.")
    other = att.other_unit()
    if other:
        spans.append(" Also confirmed, measured on another figure (not part of this gap): " + "; ".join(
            f"{c.name} {c.delta:+.1f} {_ci(c.ci_low, c.ci_high)} ({c.metric} {att.unit})" for c in other) + ".")
    return spans


def _phase(c: Cause) -> str:
    """' (verify +8.0 ms [7.6, 8.4] per cycle, profiler-gpu)': the phase a confirmed cause moves, when measured."""
    e = c.phase_effect
    return f" ({e.line()}, {e.source.split(':', 1)[0]})" if e is not None else ""


def _rest_words(att: Attribution, r: Report) -> str:
    rest = att.unexplained
    claim = next((c for c in r.claims if c.metric == att.metric), None)
    if claim is not None and claim.outcome == "SAME":
        return f"the remaining {rest:+.1f} {att.unit} is within noise"
    return f"{rest:+.1f} {att.unit} not explained by a measured cause"


def _claims(r: Report) -> Section:
    s = Section("claims", "Claims vs measured")
    if not r.claims:
        s.blocks.append(Para(["No figures were claimed (pass --expect baseline=…,spec=…)."]))
        return s
    ncmd = len(r.commands)
    rows = [_cells(c.metric + (" (prefill excluded)" if c.basis == "decode" else ""), f"{fmt.num(c.claimed)} {c.unit}",
                   fmt.samples(c.samples), fmt.num(c.median),
                   _ci(c.ci_low, c.ci_high), fmt.pct(c.pct_change), c.outcome or fmt.DASH, fmt.pval(c.p_value),
                   _ev(derive.claim_evidence(c, r), ncmd))
            for c in r.claims]
    s.blocks.append(Table(["metric", "claimed", "measured samples", "median", "95% CI", "change", "outcome",
                           "p", "evidence"], rows))
    if any(c.basis == "decode" for c in r.claims):
        s.blocks.append(Para(["A claim marked 'prefill excluded' reads as a regression over whole requests but not "
                              "with the time to the first token left out (how a server log's gen throughput or "
                              "1/TPOT measures): it is judged in that reading, the nearer one."]))
    return s


def _attribution(r: Report) -> Section:
    s = Section("attribution", "Where the gap goes")
    att = derive.attribution(r)
    if att is None:
        s.blocks.append(Para(["No claimed or reference figure to measure a gap from."]))
        return s
    s.blocks.append(Figure("waterfall", f"{att.metric} {att.unit}: {att.reference_label} figure → each confirmed "
                                        "cause (95% CI) → what is left → measured"))
    rows = [_cells(att.reference_label, f"{fmt.num(att.reference)} {att.unit}", fmt.DASH, fmt.DASH, fmt.DASH, fmt.DASH)]
    other = att.other_unit()
    for c in att.in_unit() + other:
        apart = f" (measured on {c.metric} {att.unit}: not part of this gap)" if c in other else ""
        rows.append(_cells(c.name + ("" if c.confirmed else " (candidate, not confirmed)") + apart + _phase(c),
                           f"{c.delta:+.1f}",
                           _ci(c.ci_low, c.ci_high), c.kind,
                           [Code(c.fix)] if c.fix else fmt.DASH,
                           [Ev(None, None, _dedup(c.command_ids))] if c.command_ids else fmt.DASH))
    rows.append(_cells("rest (noise or unexplained)", f"{att.unexplained:+.1f}", fmt.DASH, fmt.DASH, fmt.DASH,
                       fmt.DASH))
    rows.append(_cells("measured", f"{fmt.num(att.measured)} {att.unit}", _ci(att.measured_ci_low,
                                                                            att.measured_ci_high), fmt.DASH, fmt.DASH,
                       fmt.DASH))
    if att.causes:
        s.blocks.append(Table(["step", f"Δ {att.unit}", "95% CI", "kind", "fix", "evidence"], rows))
    else:
        s.blocks.append(Para([f"No difference was reverted and measured to change {att.metric}: the whole "
                              f"{att.gap:+.1f} {att.unit} is the rest."]))
    if att.derived and att.causes:
        s.blocks.append(Para(["Derived by the report from the claims and the bisection's measured trials (the "
                              "diagnosis did not provide a per-cause attribution)."]))
    return s


def _findings(r: Report) -> Section:
    s = Section("findings", "Key findings")
    if not r.findings:
        s.blocks.append(Para(["No findings recorded."]))
        return s
    ncmd = len(r.commands)
    items: list[list[Span]] = []
    for f in _merged_findings([f for f in r.findings if not _restates_suspect(f, r)]):
        spans: list[Span] = [f"[{f.severity}] " if f.severity != "info" else "", f.title]
        if f.detail:
            spans.append(f" — {f.detail}")
        evs = [e for ev in f.evidence for e in _ev(ev, ncmd) if isinstance(e, Ev)]
        if evs:
            merged = Ev(evs[0].tool, evs[0].step, _dedup([i for e in evs for i in e.ids]),
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


def _game_plan(r: Report) -> Section:
    s = Section("game-plan", "Game plan")
    if not r.game_plan:
        s.blocks.append(Para(["No actions proposed."]))
        return s
    rows = []
    for i, a in enumerate(derive.ranked_actions(r), 1):
        title = a.title + (f" {LLM_MARK}" if a.llm_made else "")
        cmd = derive.action_command(a, r)
        rows.append(_cells(str(i), title, _gain(a), a.basis, a.cost or fmt.DASH, a.risk or fmt.DASH,
                           a.detail or fmt.DASH, [Code(cmd)] if cmd else fmt.DASH))
    s.blocks.append(Table(["#", "action", "expected gain", "basis", "cost", "risk", "detail", "command"], rows))
    return s


def _measurement_rows(ms: list[Measurement], cmd_count: int,
                      fallback: Evidence | None = None) -> list[list[list[Span]]]:
    return [_cells(m.label, m.unit, str(len(m.samples)), fmt.samples(m.samples), fmt.num(m.median),
                   _ci(m.ci_low, m.ci_high), fmt.num(m.tpot_ms), fmt.num(m.accept_length, 2),
                   fmt.yesno(m.cuda_graph), _ev(m.evidence or fallback, cmd_count)) for m in ms]


_MEAS_HEAD = ["configuration", "unit", "runs", "samples", "median", "95% CI", "TPOT ms", "accept len",
              "CUDA graph", "evidence"]


def _measurements(r: Report) -> Section:
    s = Section("measurements", "Measurements")
    if not r.measurements:
        s.blocks.append(_NOT_RUN)
        return s
    s.blocks.append(Table(_MEAS_HEAD, _measurement_rows(r.measurements, len(r.commands))))
    s.blocks.append(Figure("throughput", "Throughput per configuration (one point per run)"))
    s.blocks += _phase_blocks(r)
    return s


def _phase_blocks(r: Report) -> list[Block]:
    """Per-cycle phase times: what each phase costs, how many cycles measured it, and which instrument."""
    p = r.phase_times
    if p is None:
        return []
    rows = [_cells(name, fmt.num(st.ms, 2), str(len(st.samples)), _ci(*(st.ci or (None, None))),
                   fmt.num(st.cpu_ms, 2), st.source)
            for name, st in (("draft (one step)", p.draft_ms), ("verify", p.verify_ms),
                             ("draft-extend", p.draft_extend_ms), ("cycle", p.cycle_ms), ("plain decode", p.decode_ms))
            if st is not None]
    over = (f"; the profiler cost {p.overhead.pct:.1f} % tok/s ({fmt.num(p.overhead.tps_without)} → "
            f"{fmt.num(p.overhead.tps_with)}; profiled runs are used for phase times only)" if p.overhead else "")
    head = f"Phase times per cycle ({p.source}, {p.cycles} cycles, k = {p.steps}){over}"
    short = "; ".join(f"{name} {fmt.num(st.ms, 2)} ms {_ci(*(st.ci or (None, None)))}"
                      for name, st in (("draft/step", p.draft_ms), ("verify", p.verify_ms),
                                       ("draft-extend", p.draft_extend_ms), ("decode", p.decode_ms)) if st is not None)
    table: list[Block] = [Table(["phase", "ms", "cycles", "95% CI", "CPU ms", "source"], rows)]
    if p.notes:
        table.append(Bullets([[n] for n in p.notes]))
    return [Details(head, table, md_short=[Para([f"{head}: {short}."])])]


def _suspects(r: Report) -> Section:
    s = Section("suspects", "Suspects")
    if not r.suspects:
        s.blocks.append(Para(["No changed files."]))
        return s
    rows = []
    for x in r.suspects:
        path_cell: list[Span] = [Code(x.path)]
        if x.logging_only:
            path_cell.append(" (logging only)")
        rows.append(_cells(path_cell, x.subsystem or fmt.DASH, fmt.yesno(x.on_hot_path, "on", "off"),
                           x.reason or fmt.DASH, [Code(x.gated)] if x.gated else "no",
                           x.bisection or fmt.DASH))
    s.blocks.append(Table(["file", "subsystem", "hot path", "why", "gated", "bisection"], rows))
    link = _union([x.evidence for x in r.suspects], len(r.commands))
    if link:
        s.blocks.append(Para(["Triage of every file: ", *link]))
    return s


def _gates(r: Report) -> Section:
    s = Section("gates", "Feature gates")
    if not r.gates:
        s.blocks.append(Para(["No env-var gates found in the added code."]))
        return s
    rows = []
    for g in r.gates:
        vals = _group_values(g.values)
        rows.append(_cells([Code(g.name)], fmt.value(g.default), [Code(g.reader)] if g.reader else fmt.DASH,
                           [Code(g.file)] if g.file else fmt.DASH, g.state or fmt.DASH, vals))
    s.blocks.append(Table(["gate", "default", "reader", "file", "state", "values per process"], rows))
    link = _union([g.evidence for g in r.gates], len(r.commands))
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


def _env(r: Report) -> Section:
    s = Section("env", "Environment propagation")
    if not r.env_propagation:
        s.blocks.append(_NOT_RUN)
        return s
    ranks = sorted({k for row in r.env_propagation for k in row.workers}, key=lambda k: (len(k), k))
    rows = []
    for e in r.env_propagation:
        src = ", ".join(n for n, b in (("forced by sglang", e.forced_by_sglang), ("sitecustomize", e.from_sitecustomize),
                                       ("nccl.conf", e.from_nccl_conf)) if b) or fmt.DASH
        vals = [fmt.value(e.workers.get(k)) for k in ranks]
        rows.append(_cells([Code(e.name)], fmt.value(e.shell), fmt.value(e.parent), *vals, src, e.status or fmt.DASH))
    n = len(ranks)
    uniform = n > 1 and all(len({_span_text(c[0]) for c in row[3:3 + n]}) == 1 for row in rows)
    if uniform:     # every rank agrees on every variable: one column says it
        rows = [row[:3] + [row[3]] + row[3 + n:] for row in rows]
        heads = [f"all {n} workers ({ranks[0]}–{ranks[-1]})"]
    else:
        heads = [f"rank {k}" for k in ranks]
    s.blocks.append(Table(["variable", "shell", "parent", *heads, "source", "status"], rows))
    link = _union([e.evidence for e in r.env_propagation], len(r.commands))
    if link:
        s.blocks.append(Para(["Read from /proc of the parent and every worker: ", *link]))
    return s



def _bisection(r: Report) -> Section:
    s = Section("bisection", "Bisection trials")
    if not r.bisection:
        s.blocks.append(Para(["No bisection ran." if r.stash is None or not r.stash.culprits else
                              "The bisection's trials were not recorded in this report."]))
        return s
    s.blocks.append(Figure("bisection", "Bisection trials in order: which patches were in, and the outcome"))
    rows = [_cells(str(t.index), ", ".join(PurePosixPath(p).name for p in t.patches) or "(essentials only)",
                   t.outcome, fmt.num(t.median), str(len(t.samples)), t.purpose or fmt.DASH, t.cause or fmt.DASH)
            for t in r.bisection]
    s.blocks.append(Table(["trial", "patches in", "outcome", "median tok/s", "runs", "purpose", "why"], rows))
    return s


_IDENTITY = ("index", "uuid", "bus_id", "pid", "id")


def _scalar(v: object) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _fp_value(v: object) -> str:
    if v is None:
        return "not found"
    if isinstance(v, (list, dict)) and not v:
        return "none"
    return fmt.value(v)


def _ranges(values: list[str]) -> str:
    """'0–3, 5' for integer labels; otherwise a count."""
    if all(v.isdigit() for v in values):
        nums = sorted(int(v) for v in values)
        out, start, prev = [], nums[0], nums[0]
        for n in [*nums[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            out.append(str(start) if start == prev else f"{start}–{prev}")
            if n is not None:
                start = prev = n
        return ", ".join(out)
    return values[0] if len(values) == 1 else f"{len(values)} values"


_NUMBERED = re.compile(r"(?<=[A-Za-z_])\d+$")


def _numbered(values: list[str]) -> str:
    """One value, or 'name_TP0–7' for values that differ only by a trailing number."""
    if len(set(values)) == 1:
        return values[0]
    stem = _NUMBERED.sub("", values[0])
    return stem + _ranges([v[len(stem):] for v in values])


def _records_table(name: str, recs: list[dict[str, Any]]) -> Table:
    """A list of records as one table; rows equal but for identity columns (index, uuid, pid…) are merged."""
    cols = list(dict.fromkeys(k for rec in recs for k in rec))
    ident = [c for c in cols if c.lower() in _IDENTITY or c.lower().endswith("_id")]
    rest = [c for c in cols if c not in ident]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for rec in recs:  # names numbered per rank (scheduler_TP0…TP7) group as one name with a range
        groups.setdefault(tuple(_NUMBERED.sub("#", _fp_value(rec.get(c))) for c in rest), []).append(rec)
    merged = len(groups) < len(recs)
    heads = ([ident[0]] if merged and ident else ident) + rest + (["count"] if merged else [])
    rows = []
    for members in groups.values():
        if merged:
            id_cell = [_ranges([_fp_value(m.get(ident[0])) for m in members])] if ident else []
            rows.append(_cells(*id_cell, *[_numbered([_fp_value(m.get(c)) for m in members]) for c in rest],
                               str(len(members))))
        else:
            m = members[0]
            rows.append(_cells(*[_fp_value(m.get(c)) for c in ident], *[_fp_value(m.get(c)) for c in rest]))
    return Table(heads, rows, caption=name + (" (identical rows merged)" if merged else ""))


def _fp_blocks(name: str, value: Any) -> list[Block]:
    """A structured fingerprint value as tables: records, key/value maps, or a matrix of maps."""
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return [_records_table(name, value)]
    if isinstance(value, dict) and value:
        if all(isinstance(x, dict) and all(_scalar(y) for y in x.values()) for x in value.values()):
            cols = list(dict.fromkeys(k for x in value.values() for k in x))
            rows = [_cells(k, *[_fp_value(x.get(c)) for c in cols]) for k, x in value.items()]
            return [Table(["", *cols], rows, caption=name)]
        if all(_scalar(x) for x in value.values()):
            return [Table(["key", "value"], [_cells([Code(str(k))], _fp_value(v)) for k, v in value.items()],
                          caption=name)]
        out: list[Block] = []
        for k, v in value.items():
            out += _fp_blocks(f"{name}.{k}", v) if not _scalar(v) else []
        return out
    return []


def _fingerprint(r: Report) -> Section:
    s = Section("fingerprint", "Fingerprint")
    fp = r.fingerprint
    if fp is None:
        s.blocks.append(_NOT_RUN)
        return s
    flat = [(k, v) for k, v in sorted(fp.current.items()) if _scalar(v) or (isinstance(v, (list, dict)) and not v)
            or (isinstance(v, list) and all(_scalar(x) for x in v))]
    if flat:
        pairs = [_cells([Code(k)], _fp_value(", ".join(map(str, v)) if isinstance(v, list) and v else v))
                 for k, v in flat]
        if len(pairs) > 8:  # two key/value pairs per row: the same table at half the length
            half = (len(pairs) + 1) // 2
            rows = [pairs[i] + (pairs[i + half] if i + half < len(pairs) else _cells("", ""))
                    for i in range(half)]
            s.blocks.append(Table(["key", "value", "key", "value"], rows))
        else:
            s.blocks.append(Table(["key", "value"], pairs))
    for k, v in sorted(fp.current.items()):
        sub = _fp_blocks(k, v)
        if isinstance(v, dict) and sub:    # maps (topology, env) are long: one click away in HTML
            s.blocks.append(Details(f"{k} ({len(sub)} table{'s' if len(sub) > 1 else ''})", sub,
                                    md_short=[Para([Code(k), ": in report.html and report.json."])]))
        else:
            s.blocks += sub
    if fp.previous_run is None:
        s.blocks.append(Para(["No previous run to compare with."
                              + (" Recorded by " if fp.evidence else ""), *(_ev(fp.evidence, len(r.commands))
                                                                            if fp.evidence else [])]))
        fp = fp.model_copy(update={"evidence": None})
    elif not fp.changes:
        s.blocks.append(Para([f"Identical to run {fp.previous_run}."]))
    else:
        s.blocks.append(Table(["key", "before", "after", "impact"],
                              [_cells([Code(c.key)], fmt.value(c.before), fmt.value(c.after), c.impact)
                               for c in fp.changes], caption=f"Changes since run {fp.previous_run}"))
    if fp.evidence:
        s.blocks.append(Para(["Recorded by ", *_ev(fp.evidence, len(r.commands))]))
    return s


def _stash(r: Report) -> Section:
    s = Section("stash", "Subtraction in trial trees (all patches vs essentials)")
    st = r.stash
    if st is None:
        s.blocks.append(_NOT_RUN)
        return s
    ncmd = len(r.commands)
    facts: list[list[Span]] = [["backup ", Code(st.backup_id or fmt.DASH), " (ref ", Code(st.backup_ref or fmt.DASH),
                                "; files in ", Code(st.patch_path or fmt.DASH), ")"]]
    applied: list[Span] = ["re-applied: ", ", ".join(st.applied) or "nothing"]
    if st.script:
        applied += ["; patch script ", Code(st.script)]
    facts.append(applied)
    if st.culprits:
        facts.append(["culprits (bisection): ", ", ".join(st.culprits)])
    restored = {True: "verified", False: "NOT VERIFIED", None: "not attempted"}[st.restore_verified]
    facts.append([f"restore: {restored}; tree hash before ", Code(st.hash_before or fmt.DASH), ", after ",
                  Code(st.hash_after or fmt.DASH)])
    if st.evidence:
        facts.append(_ev(st.evidence, ncmd))
    s.blocks.append(Bullets(facts))
    if st.ambiguous:  # quoted inline: one line however many (report.md stays short)
        quoted: list[Span] = [f"Ambiguous patch-script lines ({len(st.ambiguous)}), quoted: "]
        for i, line in enumerate(st.ambiguous):
            quoted += ([" · "] if i else []) + [Code(line.text)]
        s.blocks.append(Para(quoted))
    if st.measurements:
        s.blocks.append(Table(_MEAS_HEAD, _measurement_rows(st.measurements, ncmd)))
    if st.comparison:
        s.blocks.append(_comparison_para(st.comparison))
    return s


def _comparison_para(c: MetricComparison) -> Para:
    bits = [f"change {fmt.pct(c.pct_change)}"] if c.pct_change is not None else []
    if c.p_value is not None:
        bits.append(f"p = {fmt.pval(c.p_value)}")
    if c.median is not None:
        bits.append(f"median {fmt.num(c.median)} {c.unit}")
    tail = f" ({', '.join(bits)})" if bits else ""
    return Para([f"{c.metric[:1].upper()}{c.metric[1:]}: comparator says {c.outcome or 'nothing'}{tail}."])


_NCCL_MD_ROWS = 6


def _nccl(r: Report) -> Section:
    s = Section("nccl", "NCCL sweep")
    n = r.nccl
    if n is None or not n.rows:
        s.blocks.append(_NOT_RUN)
        return s
    sizes = sorted({p.size_bytes for row in n.rows for p in row.points})
    cur = derive.workers_nccl_row(r)
    cur_row = cur[0] if cur else None
    ref = {p.size_bytes: p.latency_us for p in cur_row.points} if cur_row else {}

    def row_cells(row: NcclRow) -> list[list[Span]]:
        lat = {p.size_bytes: p.latency_us for p in row.points}
        label = (derive.nccl_label(row, n.rows) + (" (promoted)" if row.promoted else "")
                 + (" ← workers now" if row is cur_row else ""))
        cells = []
        for sz in sizes:
            v, base = lat.get(sz), ref.get(sz)
            rel = f" ({100 * (v - base) / base:+.0f}%)" if v is not None and base and row is not cur_row else ""
            cells.append(fmt.num(v) + rel)
        return _cells(label, *cells)

    tp = f" on TP={n.tp}" if n.tp else ""
    if cur_row is not None:
        how = "the workers' current setting" if cur and cur[1] else "the row closest to the workers' current setting"
        s.blocks.append(Para([f"All-reduce latency in µs per message size{tp}; in brackets the change against "
                              f"{how}, ", Code(derive.nccl_label(cur_row, n.rows)),
                              " (negative is faster). ", *(_ev(n.evidence, len(r.commands)) if n.evidence else [])]))
    heads = ["config", *[fmt.size(sz) for sz in sizes]]
    s.blocks.append(Figure("nccl", "All-reduce latency per setting and message size, relative to the workers' "
                                   "current setting"))
    total = [sum(p.latency_us for p in row.points) for row in n.rows]
    order = sorted(range(len(n.rows)), key=lambda i: total[i])
    short = [n.rows[i] for i in order[:_NCCL_MD_ROWS]]
    if cur_row is not None and cur_row not in short:
        short.append(cur_row)
    full = Table(heads, [row_cells(row) for row in n.rows])
    s.blocks.append(Details(f"All {len(n.rows)} configurations", [full],
                            md_short=[Table(heads, [row_cells(row) for row in short],
                                            caption=f"Fastest {_NCCL_MD_ROWS} of {len(n.rows)} by total latency, "
                                                    "and the workers' setting (all in report.html)")]))
    if n.ab:
        s.blocks.append(Table(["config", "median", "95% CI", "change", "outcome", "p", "evidence"],
                              [_cells(c.metric, fmt.num(c.median, unit=c.unit), _ci(c.ci_low, c.ci_high),
                                      fmt.pct(c.pct_change), c.outcome or fmt.DASH, fmt.pval(c.p_value),
                                      _ev(c.evidence, len(r.commands)))
                               for c in n.ab], caption="Promoted configurations, end-to-end A/B"))
    if n.propagated is True:
        s.blocks.append(Para(["Propagation checked: the promoted variables reached every TP worker."]))
    elif n.propagated is False:
        s.blocks.append(Para(["Propagation checked: the variables did NOT reach every TP worker."]))
    elif not n.ab:
        s.blocks.append(Para(["Propagation to the workers was not checked: no setting was promoted to an "
                              "end-to-end A/B."]))
    else:
        s.blocks.append(Para(["Propagation to the workers was not recorded for the A/B."]))
    return s


def _breakeven(r: Report) -> Section:
    s = Section("breakeven", "Break-even")
    b = r.breakeven
    if b is None:
        s.blocks.append(_NOT_RUN)
        return s
    if b.verdict:
        link = _union([m.evidence for m in r.measurements], len(r.commands))
        s.blocks.append(Para([b.verdict, *([" · from the measurements: ", *link] if link else [])]))
    k_note = " (assumed)" if b.steps_assumed else ""
    speedup = "" if b.speedup is None else f" ({b.speedup:.2f}×)"
    pred = " (predicted)" if b.spec_tps_predicted else ""
    times = " / ".join(f"{name} {fmt.num(v)}" for name, v in (("decode", b.decode_ms), ("draft", b.draft_ms),
                                                             ("verify", b.verify_ms), ("cycle", b.cycle_ms))
                       if v is not None)
    rows = [_cells("measured τ vs break-even τ*", f"{fmt.num(b.accept_len, 2)} vs {fmt.num(b.tau_star, 2)} "
                   f"(τ* from {b.cycle_source}; margin {fmt.num(b.margin, 2)})"),
            _cells("per-token acceptance α at k", f"{fmt.num(b.alpha, 3)} at k = {b.steps}{k_note}"
                   + (f"; best k for this α: {b.best_steps}" if b.best_steps is not None else "")),
            _cells("baseline → speculative", f"{fmt.num(b.baseline_tps)} → {fmt.num(b.spec_tps)} tok/s{pred}{speedup}"),
            _cells("time per step, ms", times + (f" ({b.phase_source}: measured)" if b.phase_source and times else "")),
            _cells("dominant term", b.dominant_term or fmt.DASH), _cells("verify model", b.verify_model or fmt.DASH)]
    rows = [row for row in rows if not _empty(row[1])]
    s.blocks.append(Table(["quantity", "value"], rows))
    if b.targets:
        s.blocks.append(Table(["target speedup", "τ needed", "α needed at k", "best k", "α at best k"],
                              [_cells(f"{t.speedup:g}×", fmt.num(t.tau_needed, 2),
                                      f"{fmt.num(t.alpha_needed, 3) if t.alpha_needed is not None else 'unreachable'}"
                                      f" (k={t.steps})", fmt.num(t.best_steps), fmt.num(t.alpha_at_best, 3))
                               for t in b.targets]))
    if b.predictions:
        s.blocks.append(Table(["k", "τ at this α", "cycle ms", "predicted tok/s", "speedup"],
                              [_cells(str(p.steps), fmt.num(p.accept_len, 2), fmt.num(p.cycle_ms), fmt.num(p.tps),
                                      fmt.DASH if p.speedup is None else f"{p.speedup:.2f}×") for p in b.predictions]))
    if b.changes:
        s.blocks.append(Para([f"Against the reference run, {b.moved_term or 'no single term'} moved τ* most:"]))
        s.blocks.append(Table(["term", "before ms", "after ms", "Δ ms", "Δτ*"],
                              [_cells(c.name, fmt.num(c.before_ms, 2), fmt.num(c.after_ms, 2),
                                      f"{c.delta_ms:+.2f}", f"{c.delta_tau_star:+.2f}") for c in b.changes]))
    if b.notes:
        s.blocks.append(Bullets([[n] for n in b.notes]))
    s.blocks.append(Figure("breakeven", "Predicted tok/s vs τ for k = 1…5, baseline, measured τ and τ*"))
    return s



def _decisions(r: Report) -> Section:
    s = Section("decisions", "Decisions log")
    if not r.decisions:
        s.blocks.append(Para(["No steps ran."]))
        return s
    ncmd = len(r.commands)
    rows = [_cells(str(i), [Code(d.step)], [Code(d.tool)] if d.tool else fmt.DASH, d.status, d.checked or fmt.DASH,
                   d.found or fmt.DASH, d.decided or fmt.DASH, (d.why or fmt.DASH) + (f" {LLM_MARK}" if d.llm_made else ""),
                   [Ev(d.tool, d.step, tuple(i for i in _dedup(d.command_ids) if i < ncmd))]
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
        rows.append(_cells(str(i), fmt.when(c.time), [Code(c.command)], [Code(c.cwd)] if c.cwd else fmt.DASH,
                           fmt.DASH if c.exit is None else str(c.exit), fmt.seconds(c.seconds), c.note or ""))
    return rows


COMMAND_HEAD = ["#", "time", "command", "cwd", "exit", "took", "note"]


def _commands(r: Report) -> Section:
    s = Section("commands", "Appendix: commands")
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


def _meta(r: Report) -> Section:
    m = r.meta
    s = Section("meta", "Run metadata")
    dur = fmt.seconds(m.finished - m.started) if m.started is not None and m.finished is not None else fmt.DASH
    rows = [_cells("run id", m.run_id or fmt.DASH), _cells("host", m.host or fmt.DASH),
            _cells("repository", m.repo or fmt.DASH), _cells("playbook", m.playbook or fmt.DASH),
            _cells("started", fmt.when(m.started)), _cells("finished", fmt.when(m.finished)), _cells("duration", dur),
            _cells("status", m.status), _cells("advisor", m.advisor or "rules (no LLM)"),
            _cells("specdoctor version", m.specdoctor_version or fmt.DASH),
            _cells("schema version", r.schema_version)]
    line = " · ".join(f"{row[0][0]} {_span_text(row[1][0])}" for row in rows if not _empty(row[1]))
    s.blocks.append(Details("Run details", [Table(["field", "value"], rows)], md_short=[Para([line])]))
    if m.advisor:
        s.blocks.append(Para([f"Passages marked {LLM_MARK} were written by {m.advisor}; everything else is "
                              "computed from measurements."]))
    return s




_BUILDERS = [_verdict, _plan, _claims, _attribution, _findings, _game_plan, _measurements, _suspects, _bisection, _gates,
             _env, _fingerprint, _stash, _nccl, _breakeven, _decisions, _commands, _meta]


def _span_text(sp: Span) -> str:
    return sp.text if isinstance(sp, Code) else "" if isinstance(sp, Ev) and not sp.ids else str(sp)


def _empty(cell: list[Span]) -> bool:
    return all((_span_text(sp).strip() in ("", fmt.DASH)) and not (isinstance(sp, Ev) and (sp.ids or sp.literal))
               for sp in cell)


def prune_columns(t: Table) -> Table:
    """Drop columns (but the first) whose every cell is empty or a dash: an empty column says nothing."""
    if not t.rows:
        return t
    keep = [0] + [j for j in range(1, len(t.headers)) if not all(_empty(row[j]) for row in t.rows if j < len(row))]
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
