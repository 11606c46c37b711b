"""Actions that conclude a run: the verdict and the game plan (from the advisor)."""

from __future__ import annotations

from typing import Any

from specdoctor.advisor.rules import decide_verdict, game_plan
from specdoctor.engine.actions import ActionOutcome, action
from specdoctor.engine.state import Decision, StateView

__all__ = ["conclude"]


@action("read")
def conclude(deps, view: StateView, step, args: dict[str, Any]) -> ActionOutcome:
    """Decide the verdict and rank the next actions from everything measured and found."""
    verdict = decide_verdict(view)
    plan = game_plan(view, verdict)
    if deps.advisor is not None and hasattr(deps.advisor, "refine"):
        verdict, plan = deps.advisor.refine(view, verdict, plan)
    out = ActionOutcome(summary=f"verdict {verdict.verdict} ({verdict.confidence:.0%}): {verdict.sentence}")
    out.facts = {"verdict": verdict.model_dump(), "game_plan": [a.model_dump() for a in plan]}
    out.decisions.append(Decision(step=step.id, title=step.title, checked="all findings and measurements",
                                  found="; ".join(verdict.reasons), decided=f"verdict {verdict.verdict}",
                                  why=verdict.sentence, llm_made=verdict.llm_made))
    return out
