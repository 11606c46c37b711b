"""What was measured: the "Measurements" section (with per-cycle phase times) and "Bisection trials"."""

from __future__ import annotations

from pathlib import PurePosixPath

from specdoctor.report import fmt
from specdoctor.report.blocks import Block, Bullets, Details, Figure, Para, Section, Span, Table
from specdoctor.report.model import Evidence, Measurement, Report
from specdoctor.report.sections.cells import NOT_RUN, ci_text, ev_link, table_row

__all__ = ["measurements_section", "bisection_section", "measurement_rows", "MEAS_HEAD"]


def measurement_rows(ms: list[Measurement], cmd_count: int,
                     fallback: Evidence | None = None) -> list[list[list[Span]]]:
    return [table_row(m.label, m.unit, str(len(m.samples)), fmt.samples(m.samples), fmt.num(m.median),
                      ci_text(m.ci_low, m.ci_high), fmt.num(m.tpot_ms), fmt.num(m.accept_length, 2),
                      fmt.yesno(m.cuda_graph), ev_link(m.evidence or fallback, cmd_count)) for m in ms]


MEAS_HEAD = ["configuration", "unit", "runs", "samples", "median", "95% CI", "TPOT ms", "accept len",
             "CUDA graph", "evidence"]


def measurements_section(r: Report, s: Section) -> Section:
    if not r.measurements:
        s.blocks.append(NOT_RUN)
        return s
    if r.workload is not None:
        note = (" The claims record no workload: compare them only if they were measured the same way."
                if r.claims and r.claims_workload is None else "")
        s.blocks.append(Para([f"Workload of every figure below: {r.workload.line()}.{note}"], role="workload"))
    s.blocks.append(Table(MEAS_HEAD, measurement_rows(r.measurements, len(r.commands))))
    s.blocks.append(Figure("throughput", "Throughput per configuration (one point per run)"))
    s.blocks += _phase_blocks(r)
    return s


def _phase_blocks(r: Report) -> list[Block]:
    """Per-cycle phase times: what each phase costs, how many cycles measured it, and which instrument."""
    p = r.phase_times
    if p is None:
        return []
    rows = [table_row(name, fmt.num(st.ms, 2), str(len(st.samples)), ci_text(*(st.ci or (None, None))),
                      fmt.num(st.cpu_ms, 2), st.source)
            for name, st in (("draft (one step)", p.draft_ms), ("verify", p.verify_ms),
                             ("draft-extend", p.draft_extend_ms), ("sample", p.sample_ms), ("cycle", p.cycle_ms),
                             ("plain decode", p.decode_ms))
            if st is not None]
    over = (f"; the profiler cost {p.overhead.pct:.1f} % tok/s ({fmt.num(p.overhead.tps_without)} → "
            f"{fmt.num(p.overhead.tps_with)}; profiled runs are used for phase times only)" if p.overhead else "")
    runs = f"; from {p.measured_on}" if p.measured_on else "; runs not recorded"
    head = f"Phase times per cycle ({p.source}, {p.cycles} cycles, k = {p.steps}{runs}){over}"
    short = "; ".join(f"{name} {fmt.num(st.ms, 2)} ms {ci_text(*(st.ci or (None, None)))}"
                      for name, st in (("draft/step", p.draft_ms), ("verify", p.verify_ms),
                                       ("draft-extend", p.draft_extend_ms), ("sample", p.sample_ms),
                                       ("decode", p.decode_ms)) if st is not None)
    table: list[Block] = [Table(["phase", "ms", "cycles", "95% CI", "CPU ms", "source"], rows)]
    if p.notes:
        table.append(Bullets([[n] for n in p.notes]))
    return [Details(head, table, md_short=[Para([f"{head}: {short}."])])]


def bisection_section(r: Report, s: Section) -> Section:
    if not r.bisection:
        s.blocks.append(Para(["No bisection ran." if r.stash is None or not r.stash.culprits else
                              "The bisection's trials were not recorded in this report."]))
        return s
    s.blocks.append(Figure("bisection", "Bisection trials in order: which patches were in, and the outcome"))
    rows = [table_row(str(t.index), ", ".join(PurePosixPath(p).name for p in t.patches) or "(essentials only)",
                      t.outcome, fmt.num(t.median), str(len(t.samples)), t.purpose or fmt.DASH, t.cause or fmt.DASH)
            for t in r.bisection]
    s.blocks.append(Table(["trial", "patches in", "outcome", "median tok/s", "runs", "purpose", "why"], rows))
    return s
