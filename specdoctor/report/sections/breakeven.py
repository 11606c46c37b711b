"""The "Break-even" section: measured τ against τ*, the targets, the per-k predictions and what moved τ*."""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import Bullets, Figure, Para, Section, Table
from specdoctor.report.model import BreakevenAnalysis, Report
from specdoctor.report.sections.cells import NOT_RUN, is_empty, table_row, union_link

__all__ = ["breakeven_section"]


def _quantities(b: BreakevenAnalysis) -> Table:
    """The quantity/value table: τ vs τ*, α at k, the two throughputs, the step times, the model's terms."""
    k_note = " (assumed)" if b.steps_assumed else ""
    speedup = "" if b.speedup is None else f" ({b.speedup:.2f}×)"
    pred = " (predicted)" if b.spec_tps_predicted else ""
    times = " / ".join(f"{name} {fmt.num(v)}" for name, v in (("decode", b.decode_ms), ("draft", b.draft_ms),
                                                             ("verify", b.verify_ms), ("cycle", b.cycle_ms))
                       if v is not None)
    rows = [table_row("measured τ vs break-even τ*", f"{fmt.num(b.accept_len, 2)} vs {fmt.num(b.tau_star, 2)} "
                      f"(τ* from {b.cycle_source}; margin {fmt.num(b.margin, 2)})"),
            table_row("per-token acceptance α at k", f"{fmt.num(b.alpha, 3)} at k = {b.steps}{k_note}"
                      + (f"; best k for this α: {b.best_steps}" if b.best_steps is not None else "")),
            table_row("baseline → speculative", f"{fmt.num(b.baseline_tps)} → {fmt.num(b.spec_tps)} tok/s{pred}{speedup}"),
            table_row("time per step, ms", times + (f" ({b.phase_source}: measured)" if b.phase_source and times else "")),
            table_row("dominant term", b.dominant_term or fmt.DASH), table_row("verify model", b.verify_model or fmt.DASH)]
    return Table(["quantity", "value"], [row for row in rows if not is_empty(row[1])])


def _targets(b: BreakevenAnalysis) -> Table:
    return Table(["target speedup", "τ needed", "α needed at k", "best k", "α at best k"],
                 [table_row(f"{t.speedup:g}×", fmt.num(t.tau_needed, 2),
                            f"{fmt.num(t.alpha_needed, 3) if t.alpha_needed is not None else 'unreachable'}"
                            f" (k={t.steps})", fmt.num(t.best_steps), fmt.num(t.alpha_at_best, 3))
                  for t in b.targets])


def _predictions(b: BreakevenAnalysis) -> Table:
    return Table(["k", "τ at this α", "cycle ms", "predicted tok/s", "speedup"],
                 [table_row(str(p.steps), fmt.num(p.accept_len, 2), fmt.num(p.cycle_ms), fmt.num(p.tps),
                            fmt.DASH if p.speedup is None else f"{p.speedup:.2f}×") for p in b.predictions])


def _changes(b: BreakevenAnalysis) -> list[Para | Table]:
    return [Para([f"Against the reference run, {b.moved_term or 'no single term'} moved τ* most:"]),
            Table(["term", "before ms", "after ms", "Δ ms", "Δτ*"],
                  [table_row(c.name, fmt.num(c.before_ms, 2), fmt.num(c.after_ms, 2),
                             f"{c.delta_ms:+.2f}", f"{c.delta_tau_star:+.2f}") for c in b.changes])]


def breakeven_section(r: Report, s: Section) -> Section:
    b = r.breakeven
    if b is None:
        s.blocks.append(NOT_RUN)
        return s
    if b.verdict:
        link = union_link([m.evidence for m in r.measurements], len(r.commands))
        s.blocks.append(Para([b.verdict, *([" · from the measurements: ", *link] if link else [])]))
    s.blocks.append(_quantities(b))
    if b.targets:
        s.blocks.append(_targets(b))
    if b.predictions:
        s.blocks.append(_predictions(b))
    if b.changes:
        s.blocks.extend(_changes(b))
    if b.notes:
        s.blocks.append(Bullets([[n] for n in b.notes]))
    s.blocks.append(Figure("breakeven", "Predicted tok/s vs τ for k = 1…5, baseline, measured τ and τ*"))
    return s
