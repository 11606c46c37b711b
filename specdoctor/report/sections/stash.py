"""The "Subtraction in trial trees" section: the backup, what was re-applied, the restore, and the A/B."""

from __future__ import annotations

from specdoctor.report import fmt
from specdoctor.report.blocks import Bullets, Code, Para, Section, Span, Table
from specdoctor.report.model import MetricComparison, Report
from specdoctor.report.sections.cells import NOT_RUN, ev_link
from specdoctor.report.sections.measurements import MEAS_HEAD, measurement_rows

__all__ = ["stash_section"]


def stash_section(r: Report, s: Section) -> Section:
    st = r.stash
    if st is None:
        s.blocks.append(NOT_RUN)
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
        facts.append(ev_link(st.evidence, ncmd))
    s.blocks.append(Bullets(facts))
    if st.ambiguous:  # quoted inline: one line however many (report.md stays short)
        quoted: list[Span] = [f"Ambiguous patch-script lines ({len(st.ambiguous)}), quoted: "]
        for i, line in enumerate(st.ambiguous):
            quoted += ([" · "] if i else []) + [Code(line.text)]
        s.blocks.append(Para(quoted))
    if st.measurements:
        s.blocks.append(Table(MEAS_HEAD, measurement_rows(st.measurements, ncmd)))
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
