"""The answer first: "Verdict and what to do" (the verdict, the gap, the top actions, the box as left)."""

from __future__ import annotations

from specdoctor.report import derive, fmt
from specdoctor.report.blocks import LLM_MARK, Code, Para, Section, Table
from specdoctor.report.box_line import box_left, plan_vs_actual
from specdoctor.report.model import MetricComparison, Report, confidence_label
from specdoctor.report.sections.cells import gain_text, table_row, union_link
from specdoctor.report.sections.claims import gap_spans

__all__ = ["verdict_section"]


def _claim_words(c: MetricComparison) -> str:
    return (f"{c.metric}: claimed {fmt.num(c.claimed)}, measured {fmt.num(c.median)} {c.unit} "
            f"({fmt.pct(c.pct_change)}{', prefill excluded' if c.basis == 'decode' else ''})")


def verdict_section(r: Report, s: Section) -> Section:
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
        link = union_link([derive.claim_evidence(claim, r)], len(r.commands)) if claim else []
        s.blocks.append(Para(gap_spans(att, r) + ([" ", *link] if link else []), role="gap"))
    actions = derive.ranked_actions(r)[:3]
    if actions:
        rows = []
        for i, a in enumerate(actions, 1):
            cmd = derive.action_command(a, r)
            rows.append(table_row(str(i), a.title + (f" {LLM_MARK}" if a.llm_made else ""), gain_text(a), a.basis,
                                  [Code(cmd)] if cmd else "no single command: see the game plan"))
        s.blocks.append(Table(["#", "top action", "expected gain", "basis", "command"], rows))
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
