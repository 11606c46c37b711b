"""The report as a neutral document (sections of paragraphs, tables, lists), rendered by md/html/rich.

Building the content once keeps the three formats in step: same sections, same order, same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specdoctor.report import fmt
from specdoctor.report.model import Evidence, Measurement, MetricComparison, Report, confidence_label

__all__ = ["Code", "Span", "Para", "Table", "Bullets", "Quote", "Figure", "Block", "Section", "Document",
           "build", "SECTION_IDS", "LLM_MARK"]

LLM_MARK = "[LLM-made]"


@dataclass(frozen=True)
class Code:
    """Inline code (commands, paths, variable names)."""

    text: str


Span = str | Code


@dataclass
class Para:
    spans: list[Span]
    llm_made: bool = False
    strong: bool = False


@dataclass
class Table:
    headers: list[str]
    rows: list[list[list[Span]]]


@dataclass
class Bullets:
    items: list[list[Span]]


@dataclass
class Quote:
    """Verbatim lines (patch-script output, stdout tails)."""

    lines: list[str]


@dataclass
class Figure:
    """A plot slot; only the HTML renderer draws it (`key` picks the plot)."""

    key: str
    caption: str


Block = Para | Table | Bullets | Quote | Figure


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


SECTION_IDS = ["verdict", "claims", "findings", "game-plan", "measurements", "suspects", "gates", "env",
               "fingerprint", "stash", "nccl", "breakeven", "decisions", "commands", "meta"]

_NOT_RUN = Para(["Not run in this investigation."])


def _cells(*cells: object) -> list[list[Span]]:
    out: list[list[Span]] = []
    for c in cells:
        if isinstance(c, list):
            out.append(c)
        elif isinstance(c, Code):
            out.append([c])
        else:
            out.append([str(c)])
    return out


def _ev(ev: Evidence | None, cmd_count: int) -> list[Span]:
    """Evidence as spans: tool, step, command ids, literal commands, numbers."""
    if ev is None:
        return [fmt.DASH]
    spans: list[Span] = []
    if ev.tool:
        spans += ["tool ", Code(ev.tool)]
    if ev.step:
        spans += ["; step ", Code(ev.step)]
    if ev.command_ids:
        spans += ["; commands " + ", ".join(f"#{i}" for i in ev.command_ids)]
    for c in ev.commands:
        spans += ["; ", Code(c)]
    if ev.numbers:
        nums = ", ".join(f"{k}={fmt.value(v)}" for k, v in ev.numbers.items())
        spans += [f"; {nums}"]
    if spans and isinstance(spans[0], str):
        spans[0] = spans[0].lstrip("; ")
    return spans or [fmt.DASH]


def _ci(low: float | None, high: float | None) -> str:
    return fmt.DASH if low is None or high is None else f"[{fmt.num(low)}, {fmt.num(high)}]"


def _verdict(r: Report) -> Section:
    s = Section("verdict", "Verdict")
    conf = "" if r.confidence is None else f" (confidence {confidence_label(r.confidence)}, {r.confidence:.2f})"
    s.blocks.append(Para([Code(r.verdict), conf], strong=True))
    if r.summary:
        s.blocks.append(Para([r.summary], llm_made=r.summary_llm_made))
    if r.meta.status != "complete":
        note = f"This report is {r.meta.status}"
        s.blocks.append(Para([note + (f": {r.meta.error}" if r.meta.error else ".")]))
    return s


def _claims(r: Report) -> Section:
    s = Section("claims", "Claims vs measured")
    if not r.claims:
        s.blocks.append(Para(["No figures were claimed (pass --expect baseline=…,spec=…)."]))
        return s
    rows = [_cells(c.metric, f"{fmt.num(c.claimed)} {c.unit}", fmt.samples(c.samples), fmt.num(c.median),
                   _ci(c.ci_low, c.ci_high), fmt.pct(c.pct_change), c.outcome or fmt.DASH, fmt.pval(c.p_value),
                   _ev(c.evidence, len(r.commands)))
            for c in r.claims]
    s.blocks.append(Table(["metric", "claimed", "measured samples", "median", "95% CI", "change", "outcome",
                           "p", "evidence"], rows))
    return s


def _findings(r: Report) -> Section:
    s = Section("findings", "Key findings")
    if not r.findings:
        s.blocks.append(Para(["No findings recorded."]))
        return s
    items: list[list[Span]] = []
    for f in r.findings:
        spans: list[Span] = [f"[{f.severity}] " if f.severity != "info" else "", f.title]
        if f.detail:
            spans.append(f" — {f.detail}")
        for ev in f.evidence:
            spans += [" (evidence: ", *_ev(ev, len(r.commands)), ")"]
        if f.llm_made:
            spans.append(f" {LLM_MARK}")
        items.append([sp for sp in spans if sp != ""])
    s.blocks.append(Bullets(items))
    return s


def _game_plan(r: Report) -> Section:
    s = Section("game-plan", "Game plan")
    if not r.game_plan:
        s.blocks.append(Para(["No actions proposed."]))
        return s
    rows = []
    for i, a in enumerate(r.game_plan, 1):
        gain = fmt.DASH if a.gain is None else (f"{a.gain:+.1f} tok/s" if a.gain_unit == "tok/s" else fmt.pct(a.gain))
        title = a.title + (f" {LLM_MARK}" if a.llm_made else "")
        rows.append(_cells(str(i), title, gain, a.basis, a.cost or fmt.DASH, a.risk or fmt.DASH, a.detail or fmt.DASH))
    s.blocks.append(Table(["#", "action", "expected gain", "basis", "cost", "risk", "detail"], rows))
    return s


def _measurement_rows(ms: list[Measurement], cmd_count: int) -> list[list[list[Span]]]:
    return [_cells(m.label, m.unit, str(len(m.samples)), fmt.samples(m.samples), fmt.num(m.median),
                   _ci(m.ci_low, m.ci_high), fmt.num(m.tpot_ms), fmt.num(m.accept_length, 2),
                   fmt.yesno(m.cuda_graph), _ev(m.evidence, cmd_count)) for m in ms]


_MEAS_HEAD = ["configuration", "unit", "runs", "samples", "median", "95% CI", "TPOT ms", "accept len",
              "CUDA graph", "evidence"]


def _measurements(r: Report) -> Section:
    s = Section("measurements", "Measurements")
    if not r.measurements:
        s.blocks.append(_NOT_RUN)
        return s
    s.blocks.append(Table(_MEAS_HEAD, _measurement_rows(r.measurements, len(r.commands))))
    s.blocks.append(Figure("throughput", "Throughput per configuration (one point per run)"))
    return s


def _suspects(r: Report) -> Section:
    s = Section("suspects", "Suspects")
    if not r.suspects:
        s.blocks.append(Para(["No changed files."]))
        return s
    rows = []
    for x in r.suspects:
        path_cell: list[Span] = [Code(x.path)] + ([" (logging only)"] if x.logging_only else [])
        rows.append(_cells(path_cell, x.subsystem or fmt.DASH, fmt.yesno(x.on_hot_path, "on", "off"),
                           x.reason or fmt.DASH, [Code(x.gated)] if x.gated else "no",
                           x.bisection or fmt.DASH))
    s.blocks.append(Table(["file", "subsystem", "hot path", "why", "gated", "bisection"], rows))
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
        rows.append(_cells([Code(e.name)], fmt.value(e.shell), fmt.value(e.parent),
                           *[fmt.value(e.workers.get(k)) for k in ranks], src, e.status or fmt.DASH))
    s.blocks.append(Table(["variable", "shell", "parent", *[f"rank {k}" for k in ranks], "source", "status"], rows))
    return s


def _fingerprint(r: Report) -> Section:
    s = Section("fingerprint", "Fingerprint")
    fp = r.fingerprint
    if fp is None:
        s.blocks.append(_NOT_RUN)
        return s
    if fp.current:
        s.blocks.append(Table(["key", "value"], [_cells([Code(k)], fmt.value(v)) for k, v in sorted(fp.current.items())]))
    if fp.previous_run is None:
        s.blocks.append(Para(["No previous run to compare with."]))
    elif not fp.changes:
        s.blocks.append(Para([f"Identical to run {fp.previous_run}."]))
    else:
        s.blocks.append(Para([f"Changes since run {fp.previous_run}:"]))
        s.blocks.append(Table(["key", "before", "after", "impact"],
                              [_cells([Code(c.key)], fmt.value(c.before), fmt.value(c.after), c.impact)
                               for c in fp.changes]))
    return s


def _stash(r: Report) -> Section:
    s = Section("stash", "Stash and reapply")
    st = r.stash
    if st is None:
        s.blocks.append(_NOT_RUN)
        return s
    ncmd = len(r.commands)
    facts: list[list[Span]] = [["backup id: ", Code(st.backup_id or fmt.DASH)], ["backup ref: ", Code(st.backup_ref or fmt.DASH)],
             ["patch file: ", Code(st.patch_path or fmt.DASH)], ["tree hash before: ", Code(st.hash_before or fmt.DASH)],
             ["re-applied: ", ", ".join(st.applied) or "nothing"]]
    if st.script:
        facts.append(["patch script: ", Code(st.script)])
    if st.culprits:
        facts.append(["culprits (bisection): ", ", ".join(st.culprits)])
    restored = {True: "verified", False: "NOT VERIFIED", None: "not attempted"}[st.restore_verified]
    facts.append([f"restore: {restored}, hash after ", Code(st.hash_after or fmt.DASH)])
    s.blocks.append(Bullets(facts))
    if st.ambiguous:
        s.blocks.append(Para([f"Ambiguous patch-script lines ({len(st.ambiguous)}), quoted:"]))
        s.blocks.append(Quote([line.text for line in st.ambiguous]))
    if st.measurements:
        s.blocks.append(Table(_MEAS_HEAD, _measurement_rows(st.measurements, ncmd)))
    if st.comparison:
        s.blocks.append(_comparison_para(st.comparison))
    if st.evidence:
        s.blocks.append(Para(["Evidence: ", *_ev(st.evidence, ncmd)]))
    return s


def _comparison_para(c: MetricComparison) -> Para:
    return Para([f"{c.metric}: {c.outcome or fmt.DASH} (change {fmt.pct(c.pct_change)}, p {fmt.pval(c.p_value)}, "
                 f"median {fmt.num(c.median)} {c.unit})"])


def _nccl(r: Report) -> Section:
    s = Section("nccl", "NCCL sweep")
    n = r.nccl
    if n is None or not n.rows:
        s.blocks.append(_NOT_RUN)
        return s
    sizes = sorted({p.size_bytes for row in n.rows for p in row.points})
    rows = []
    for row in n.rows:
        lat = {p.size_bytes: p.latency_us for p in row.points}
        rows.append(_cells(row.config + (" (promoted)" if row.promoted else ""),
                           *[fmt.num(lat.get(sz)) for sz in sizes]))
    tp = f" (TP={n.tp})" if n.tp else ""
    s.blocks.append(Para([f"All-reduce latency in µs per message size{tp}."]))
    s.blocks.append(Table(["config", *[fmt.size(sz) for sz in sizes]], rows))
    s.blocks.append(Figure("nccl", "All-reduce latency vs message size per setting"))
    if n.ab:
        s.blocks.append(Para(["Promoted configurations, end-to-end A/B:"]))
        s.blocks.append(Table(["config", "median", "95% CI", "change", "outcome", "p"],
                              [_cells(c.metric, fmt.num(c.median, unit=c.unit), _ci(c.ci_low, c.ci_high),
                                      fmt.pct(c.pct_change), c.outcome or fmt.DASH, fmt.pval(c.p_value))
                               for c in n.ab]))
    prop = {True: "reached every TP worker", False: "did NOT reach every TP worker", None: "not checked"}
    s.blocks.append(Para([f"Variables {prop[n.propagated]}."]))
    return s


def _breakeven(r: Report) -> Section:
    s = Section("breakeven", "Break-even")
    b = r.breakeven
    if b is None:
        s.blocks.append(_NOT_RUN)
        return s
    if b.verdict:
        s.blocks.append(Para([b.verdict]))
    k_note = " (assumed)" if b.steps_assumed else ""
    rows = [_cells("measured accept length τ", fmt.num(b.accept_len, 2)),
            _cells("break-even τ*", f"{fmt.num(b.tau_star, 2)} (from {b.cycle_source})"),
            _cells("margin τ − τ*", fmt.num(b.margin, 2)), _cells("per-token acceptance α", fmt.num(b.alpha, 3)),
            _cells("draft steps k", f"{b.steps}{k_note}"), _cells("best k for this α", fmt.num(b.best_steps)),
            _cells("baseline", fmt.num(b.baseline_tps, unit="tok/s")),
            _cells("speculative" + (" (predicted)" if b.spec_tps_predicted else ""), fmt.num(b.spec_tps, unit="tok/s")),
            _cells("speedup", fmt.DASH if b.speedup is None else f"{b.speedup:.2f}×"),
            _cells("decode / draft / verify / cycle",
                   f"{fmt.num(b.decode_ms)} / {fmt.num(b.draft_ms)} / {fmt.num(b.verify_ms)} / {fmt.num(b.cycle_ms)} ms"),
            _cells("dominant term", b.dominant_term or fmt.DASH), _cells("verify model", b.verify_model or fmt.DASH)]
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
    rows = [_cells(str(i), [Code(d.step)], [Code(d.tool)] if d.tool else fmt.DASH, d.status, d.checked or fmt.DASH,
                   d.found or fmt.DASH, d.decided or fmt.DASH, (d.why or fmt.DASH) + (f" {LLM_MARK}" if d.llm_made else ""),
                   ", ".join(f"#{c}" for c in d.command_ids) or fmt.DASH)
            for i, d in enumerate(r.decisions, 1)]
    s.blocks.append(Table(["#", "step", "tool", "status", "checked", "found", "decided", "why", "commands"], rows))
    return s


def _commands(r: Report) -> Section:
    s = Section("commands", "Appendix: commands")
    if not r.commands:
        s.blocks.append(Para(["No commands were run."]))
        return s
    rows = [_cells(str(i), fmt.when(c.time), c.host, [Code(c.command)], [Code(c.cwd)] if c.cwd else fmt.DASH,
                   fmt.DASH if c.exit is None else str(c.exit), fmt.seconds(c.seconds), c.note or "")
            for i, c in enumerate(r.commands)]
    s.blocks.append(Table(["#", "time", "host", "command", "cwd", "exit", "took", "note"], rows))
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
    s.blocks.append(Table(["field", "value"], rows))
    if m.advisor:
        s.blocks.append(Para([f"Passages marked {LLM_MARK} were written by {m.advisor}; everything else is "
                              "computed from measurements."]))
    return s


_BUILDERS = [_verdict, _claims, _findings, _game_plan, _measurements, _suspects, _gates, _env, _fingerprint,
             _stash, _nccl, _breakeven, _decisions, _commands, _meta]


def build(report: Report) -> Document:
    """The document for a report: every section, always, in `SECTION_IDS` order."""
    sections = [b(report) for b in _BUILDERS]
    assert [s.id for s in sections] == SECTION_IDS
    host = report.meta.host or "unknown host"
    sub = f"run {report.meta.run_id or fmt.DASH} · {host} · {fmt.when(report.meta.started)}"
    return Document(title=f"specdoctor report: {report.verdict}", subtitle=sub, sections=sections)
