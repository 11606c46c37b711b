"""Actions that conclude a run: the verdict and the game plan (from the advisor)."""

from __future__ import annotations

from typing import Any

from specdoctor.diagnosis import Case, PlanAction, Verdict, diagnose
from specdoctor.diagnosis.facts import NarrativeFact, RunFacts
from specdoctor.engine.actions import ActionOutcome, action
from specdoctor.engine.context import Advisor, RunDeps
from specdoctor.engine.playbook import Step
from specdoctor.engine.state import Decision, StateView
from specdoctor.tools.checkout.repo import Triage

__all__ = ["conclude"]


@action("read", args=())
def conclude(deps: RunDeps, view: StateView, step: Step, args: dict[str, Any]) -> ActionOutcome:
    """Decide the verdict and rank the next actions from everything measured and found."""
    d = diagnose(Case.of(view))
    verdict, plan = d.verdict, d.plan
    out = ActionOutcome(summary=f"verdict {verdict.verdict} ({verdict.confidence:.0%}): {verdict.sentence}")
    out.facts = RunFacts(verdict=verdict, game_plan=plan)
    if deps.advisor is not None:
        try:
            _advise(deps.advisor, view, verdict, plan, out)
        except Exception as exc:  # the LLM is optional: its failure costs prose, never the run
            out.decisions.append(Decision(step=step.id, title=step.title, status="error",
                                          checked="LLM advisor (narrative, triage of unknown files)",
                                          found=f"LLM advisor failed: {type(exc).__name__}: {str(exc)[:200]}",
                                          decided="report without LLM passages", why="the rules' verdict stands",
                                          llm_made=True))
    out.decisions.append(Decision(step=step.id, title=step.title, checked="all findings and measurements",
                                  found="; ".join(verdict.reasons), decided=f"verdict {verdict.verdict}",
                                  why=verdict.sentence, llm_made=verdict.llm_made))
    return out


def _advise(advisor: Advisor, view: StateView, verdict: Verdict, plan: list[PlanAction], out: ActionOutcome) -> None:
    """Narrative and triage refinements from the LLM advisor, marked as LLM-made."""
    narrative = advisor.narrate(view, verdict, plan)
    if narrative is not None:
        out.facts.narrative = NarrativeFact.model_validate({**narrative.model_dump(), "llm_made": True, "model": advisor.model})
    triage = view.latest(Triage)
    unknown = [r.model_dump(mode="json") for r in triage.rows if r.subsystem == "unknown"] if triage else []
    guesses = advisor.triage_unknown(unknown)
    if guesses:
        out.facts.llm_triage = [{**g.model_dump(), "llm_made": True} for g in guesses]


@action("read", args=())
def llm_explore(deps: RunDeps, view: StateView, step: Step, args: dict[str, Any]) -> ActionOutcome:
    """Let the LLM advisor call read-only tools within a step budget (skipped without --llm)."""
    import dataclasses

    from specdoctor.toolkit import ToolResult, registry
    from specdoctor.toolkit.exports import openai_schemas

    out = ActionOutcome()
    if deps.advisor is None:
        out.status, out.summary = "skipped", "no LLM advisor (--llm not given)"
        return out
    read_only = {t.name for t in registry.all(("read",))}
    ctx = dataclasses.replace(deps.tool_ctx, auto_approve=False, approve=None)

    def call_read_tool(name: str, tool_args: dict[str, Any]) -> ToolResult:
        if name not in read_only:  # the LLM never runs a mutating tool
            return ToolResult(tool=name, status="needs_approval", summary=f"{name} is not a read-only tool; refused")
        return registry.call(ctx, name, tool_args)

    try:
        trail = deps.advisor.explore(view, call_read_tool, openai_schemas(("read",)))
    except Exception as exc:  # an unreachable or confused LLM costs the exploration, never the run
        out.status, out.summary = "error", f"LLM exploration failed: {type(exc).__name__}: {str(exc)[:200]}"
        out.decisions.append(Decision(step=step.id, title=step.title, status="error", checked="LLM exploration",
                                      found=out.summary, decided="continued without it", why="the LLM is optional",
                                      llm_made=True))
        return out
    out.facts.llm_explore = trail
    out.summary = f"LLM explored {sum(1 for t in trail if t['tool'])} read-only tool calls"
    for t in trail:
        out.decisions.append(Decision(step=step.id, title=step.title, tool=t.get("tool"), checked="LLM exploration",
                                      found=t.get("summary", ""), decided="recorded as an LLM-made finding",
                                      why="explore mode (read-only tools only)", llm_made=True))
    return out
