"""Claims against measurements: "Claims vs measured" and "Where the gap goes" (the gap's attribution)."""

from __future__ import annotations

from specdoctor.report import derive, fmt
from specdoctor.report.blocks import Code, Ev, Figure, Para, Section, Span, Table
from specdoctor.report.model import Attribution, Cause, Report
from specdoctor.report.sections.cells import ci_text, dedup_ids, ev_link, table_row

__all__ = ["claims_section", "attribution_section", "gap_spans"]


def claims_section(r: Report, s: Section) -> Section:
    if not r.claims:
        s.blocks.append(Para(["No figures were claimed (pass --expect baseline=…,spec=…, or --good-fingerprint "
                              "with the good run's measurements)."]))
        return s
    sources = sorted({c.source for c in r.claims if c.source != "--expect"})
    if sources:
        s.blocks.append(Para([f"No --expect was given: the claims are {' and '.join(sources)}'s measurements."]))
    ncmd = len(r.commands)
    rows = [table_row(c.metric + (" (prefill excluded)" if c.basis == "decode" else ""), f"{fmt.num(c.claimed)} {c.unit}",
                      fmt.samples(c.samples), fmt.num(c.median),
                      ci_text(c.ci_low, c.ci_high), fmt.pct(c.pct_change), c.outcome or fmt.DASH, fmt.pval(c.p_value),
                      ev_link(derive.claim_evidence(c, r), ncmd))
            for c in r.claims]
    s.blocks.append(Table(["metric", "claimed", "measured samples", "median", "95% CI", "change", "outcome",
                           "p", "evidence"], rows))
    measured_by = [f"{c.metric}: {c.measured_by}" for c in r.claims if c.measured_by]
    if measured_by:
        s.blocks.append(Para(["Measured as: " + "; ".join(measured_by) + "."]))
    if r.workload_differences:
        who = r.claims_workload_source or "the reference"
        s.blocks.append(Para([f"⚠ The claims were measured on another workload (recorded by {who}: "
                              + "; ".join(r.workload_differences) + "); the table compares them with this server "
                              "run on that workload" + (f" ({r.claims_workload.line()})" if r.claims_workload else "")
                              + ", not with today's benchmark."], role="workload"))
    if any(c.basis == "decode" for c in r.claims):
        s.blocks.append(Para(["A claim marked 'prefill excluded' reads as a regression over whole requests but not "
                              "with the time to the first token left out (how a server log's gen throughput or "
                              "1/TPOT measures): it is judged in that reading, the nearer one."]))
    return s


def attribution_section(r: Report, s: Section) -> Section:
    att = derive.attribution(r)
    if att is None:
        s.blocks.append(Para(["No claimed or reference figure to measure a gap from."]))
        return s
    s.blocks.append(Figure("waterfall", f"{att.metric} {att.unit}: {att.reference_label} figure → each confirmed "
                                        "cause (95% CI) → what is left → measured"))
    rows = [table_row(att.reference_label, f"{fmt.num(att.reference)} {att.unit}", fmt.DASH, fmt.DASH, fmt.DASH, fmt.DASH)]
    other = att.other_unit()
    for c in att.in_unit() + other:
        apart = f" (measured on {c.metric} {att.unit}: not part of this gap)" if c in other else ""
        rows.append(table_row(c.name + ("" if c.confirmed else " (candidate, not confirmed)") + apart + _phase(c)
                              + (f" — measured by {c.share_from}" if c.share_from else ""),
                              f"{c.delta:+.1f}",
                              ci_text(c.ci_low, c.ci_high), c.kind,
                              [Code(c.fix)] if c.fix else fmt.DASH,
                              [Ev(None, None, dedup_ids(c.command_ids))] if c.command_ids else fmt.DASH))
    rows.append(table_row("rest (noise or unexplained)", f"{att.unexplained:+.1f}", fmt.DASH, fmt.DASH, fmt.DASH,
                          fmt.DASH))
    rows.append(table_row("measured", f"{fmt.num(att.measured)} {att.unit}", ci_text(att.measured_ci_low,
                                                                            att.measured_ci_high), fmt.DASH, fmt.DASH,
                          fmt.DASH))
    if att.causes:
        s.blocks.append(Table(["step", f"Δ {att.unit}", "95% CI", "kind", "fix", "evidence"], rows))
    else:
        s.blocks.append(Para([f"No difference was reverted and measured to change {att.metric}: the whole "
                              f"{att.gap:+.1f} {att.unit} is the rest."]))
    if att.derived and att.causes:
        s.blocks.append(Para(["Read off the claims, with the bisection's culprits as the one cause, sized by their "
                              "two measured trials (the run recorded no per-cause attribution)."]))
    return s


def _gap_head(att: Attribution, r: Report) -> str:
    """The gap in the claim's own figures (the pair the verdict quotes); a claim judged with the prefill excluded
    while the trials measure whole requests is converted once, and the line says so and why."""
    claim = next((c for c in r.claims if c.metric == att.metric), None)
    if claim is None or claim.basis != "decode" or claim.claimed is None or claim.median is None \
            or "converted" not in att.reference_label:
        return (f"Measured gap ({att.metric}): {fmt.num(att.reference)} {att.reference_label} → "
                f"{fmt.num(att.measured)} {att.unit} measured = {att.gap:+.1f} {att.unit}. ")
    ratio = att.reference / claim.claimed if claim.claimed else 0.0
    return (f"Measured gap ({att.metric}, prefill excluded, as the claim reads): {fmt.num(claim.claimed)} claimed → "
            f"{fmt.num(claim.median)} {att.unit} measured = {claim.median - claim.claimed:+.1f} {att.unit}. The trials "
            f"measure whole requests, so the causes below split the same gap in those units: x {ratio:.3f} (today's "
            f"end-to-end / prefill-excluded ratio) = {att.gap:+.1f} {att.unit}. ")


def gap_spans(att: Attribution, r: Report) -> list[Span]:
    confirmed = [c for c in att.in_unit() if c.confirmed]
    spans: list[Span] = [_gap_head(att, r)]
    if confirmed:
        parts = [f"{c.name} {c.delta:+.1f} {ci_text(c.ci_low, c.ci_high)}{_phase(c)}" for c in confirmed]
        spans.append("Explained by " + "; ".join(parts) + f"; {_rest_words(att, r)}.")
    else:
        spans.append(f"No cause confirmed by a trial that reverted it: {_rest_words(att, r)}.")
    other = att.other_unit()
    if other:
        spans.append(" Also confirmed, measured on another figure (not part of this gap): " + "; ".join(
            f"{c.name} {c.delta:+.1f} {ci_text(c.ci_low, c.ci_high)} ({c.metric} {att.unit})" for c in other) + ".")
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
