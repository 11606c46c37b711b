"""The "Plan and cost" section: the launch plan, the launches made, and a dry run's commands."""

from __future__ import annotations

from specdoctor.report.blocks import Bullets, Code, Para, Section, Span
from specdoctor.report.model import Report

__all__ = ["plan_section"]


_STAGES = {"first": "the first plan", "consent": "before the stop, the plan you consented to",
           "revised": "after reproduce and list_deltas"}


def _estimates(r: Report) -> list[Span]:
    """The launches expected as the run learnt more (the plan above is the one in force at the stop)."""
    plan = r.plan
    if plan is None or len(plan.estimates) < 2:
        return []
    said = "; ".join(f"{_STAGES.get(e.stage, e.stage)} {e.launches_expected:g}" for e in plan.estimates)
    return [f" Launches expected, re-estimated as facts came: {said}."]


def plan_section(r: Report, s: Section) -> Section:
    spans: list[Span] = []
    if r.plan is None:
        spans.append("No launch plan was computed (no running server to time a launch from).")
    else:
        steps = ", ".join(f"{p.step} {p.launches}" + (f" ({p.condition})" if p.condition else "")
                          for p in r.plan.phases)
        spans.append(r.plan.text[:1].upper() + r.plan.text[1:] + "." + (f" At most, per step: {steps}." if steps
                                                                         else ""))
        spans += _estimates(r)
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
