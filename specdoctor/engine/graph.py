"""Compile a playbook into a LangGraph StateGraph: one node per step, run in order, checkpointed."""

from __future__ import annotations

import dataclasses
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from specdoctor.diagnosis.facts import RunFacts, checked_facts
from specdoctor.engine.actions import ActionOutcome
from specdoctor.engine.actions.catalogue import ACTIONS
from specdoctor.engine.budget import budget_blocker
from specdoctor.engine.context import RunDeps
from specdoctor.engine.dry_run import plan_step, runs_in_dry_run
from specdoctor.engine.playbook import Playbook, Step
from specdoctor.engine.predicates import explain
from specdoctor.engine.refs import resolve_args
from specdoctor.engine.state import Checkpoint, Decision, RunState, StateView, StepUpdate
from specdoctor.errors import HostError, SpecdoctorError
from specdoctor.host.redact import redact_text
from specdoctor.toolkit import ToolResult, registry

__all__ = ["compile_playbook", "StepAborted", "step_effect"]


class StepAborted(SpecdoctorError):
    """A step with on_error=abort failed; the run ends with an inconclusive report."""

    code = "step-aborted"


def step_effect(step: Step) -> str:
    if step.tool:
        return registry.get(step.tool).effect
    return ACTIONS[step.action or ""].effect


def _needs_approval(step: Step) -> bool:
    if step.approval == "never":
        return False
    if step.approval == "ask":
        return True
    return step_effect(step) in ("mutate", "disrupt")


def _tool_outcome(step: Step, result: ToolResult) -> ActionOutcome:
    decided = {"ok": "recorded", "no_data": "nothing to act on", "needs_approval": "skipped (not approved)",
               "unresolved": "recorded as unresolved", "error": "recorded the error"}[result.status]
    decision = Decision(step=step.id, title=step.title, tool=step.tool, status=result.status,
                        checked=step.title or registry.get(step.tool or "").summary_line,
                        found=result.summary, decided=decided,
                        why="tool result" if result.ok else (result.error or result.summary),
                        evidence=[e.command for e in result.evidence])
    return ActionOutcome(status=result.status, summary=result.summary, results={step.id: result},
                         decisions=[decision])


def _run_step(step: Step, deps: RunDeps, view: StateView) -> ActionOutcome:
    args = resolve_args(step.args, view)
    if step.tool:
        ctx = dataclasses.replace(deps.tool_ctx, auto_approve=True)  # approval was handled by the node
        outcome = _tool_outcome(step, registry.call(ctx, step.tool, args))
        out = StateView(RunState(results=outcome.results))
        saved = {fact: value for fact, path in step.save.items()
                 if (value := out.get(f"{step.id}.{path}")) is not None}
        if saved:  # `save:` names a path in the tool's JSON output (a playbook is text)
            outcome.facts = checked_facts(saved, where=f"step {step.id!r} save")
        return outcome
    return ACTIONS[step.action or ""].fn(deps, view, step, args)


def gpu_blocker(step: Step, effect: str, view: StateView) -> str | None:
    """Why a launching (disrupt) step cannot run while the user's server holds the GPUs (engine.actions.user_server)."""
    from specdoctor.engine.actions.user_server import OWN_ACTIONS, blocked_by_user_server

    if effect != "disrupt" or step.action in OWN_ACTIONS:
        return None
    return blocked_by_user_server(view)


def plan_only(step: Step, deps: RunDeps, view: StateView) -> StepUpdate:
    """--dry-run: record what the step would run (facts `dry_run`), run nothing."""
    planned = plan_step(step, view, resolve_args(step.args, view), step_effect(step))
    unknown = sum(not c.known for c in planned.commands)
    first = planned.commands[0].command if planned.commands else "nothing"
    more = len(planned.commands) - 1
    found = (f"would run {first[:160] + ('…' if len(first) > 160 else '')}" + (f" and {more} more" if more > 0 else "")
             + (f" ({unknown} known only after an earlier result)" if unknown else ""))
    d = Decision(step=step.id, title=step.title, tool=step.tool, status="dry-run",
                 checked=f"{planned.target} ({planned.effect})", found=found, decided="not run (dry run)",
                 why=planned.why, evidence=[c.command for c in planned.commands])
    deps.view.step_finished(step.id, "dry-run", found)
    plan = {**(view.run_facts.dry_run or {}), step.id: planned.model_dump(mode="json")}
    return StepUpdate(decisions=[d], facts=RunFacts(dry_run=plan), done=[step.id])


def _held_for_budget(step: Step, deps: RunDeps, view: StateView, why: str) -> StepUpdate:
    """Not started for the budget: recorded with what it would have decided and the command to continue."""
    from specdoctor.engine.budget import continue_command
    from specdoctor.models.identity import BudgetFact

    fact = view.fact("budget", BudgetFact)
    assert fact is not None  # budget_blocker holds a step back only under a recorded budget
    fact = fact.model_copy(update={"stopped_before": fact.stopped_before or step.id, "reason": fact.reason or why,
                                   "not_run": [*fact.not_run, step.id]})
    d = Decision(step=step.id, title=step.title, tool=step.tool, status="skipped", checked="the box-time budget",
                 found=why, decided="not started (budget); to continue: " + continue_command(view, fact),
                 why="--budget: the run stops where the next step would overrun, and puts your server back")
    deps.view.step_finished(step.id, "skipped", why)
    return StepUpdate(decisions=[d], facts=RunFacts(budget=fact), done=[step.id])


def make_node(step: Step):
    """The node for one step: `when`, approval (interrupt), error policy, decision, progress events."""

    def node(state: Checkpoint, runtime: Runtime[RunDeps]) -> dict[str, Any]:
        deps = runtime.context
        record = deps.record_for(state)
        update = _step(step, deps, StateView(record))
        deps.record = record.apply(update)
        return update.to_checkpoint()

    node.__name__ = f"step_{step.id}"
    return node


def _step(step: Step, deps: RunDeps, view: StateView) -> StepUpdate:
    """One step's update: skipped, held, declined, or run under its error policy."""
    if deps.dry_run and not runs_in_dry_run(step.tool or step.action or ""):
        return plan_only(step, deps, view)  # listed with its commands whatever its condition says today
    holds, said = explain(step.when, view) if step.when else (True, "")
    if not holds:
        d = Decision(step=step.id, title=step.title, tool=step.tool, status="skipped",
                     checked=f"condition `{step.when}`", found=said,
                     decided="skipped this step", why="its condition does not hold")
        deps.view.step_finished(step.id, "skipped", d.found)
        return StepUpdate(decisions=[d], done=[step.id])
    effect = step_effect(step)
    blocked = None if deps.dry_run else gpu_blocker(step, effect, view)
    if blocked:  # the user's server holds the GPUs: a launch beside it would fail (never fight for them)
        d = Decision(step=step.id, title=step.title, tool=step.tool, status="skipped",
                     checked="the GPUs this step's launches need", found=blocked, decided="not done",
                     why="the user's server holds them and was not stopped")
        deps.view.step_finished(step.id, "skipped", blocked)
        return StepUpdate(decisions=[d], done=[step.id])
    held = None if deps.dry_run else budget_blocker(step, effect, view)
    if held:  # --budget: this step would overrun the user's box minutes
        return _held_for_budget(step, deps, view, held)
    if _needs_approval(step) and not deps.yes:
        target = step.tool or step.action
        answer = interrupt({"step": step.id, "title": step.title, "target": target, "effect": step_effect(step),
                            "args": resolve_args(step.args, view)})
        if not answer:
            d = Decision(step=step.id, title=step.title, tool=step.tool, status="declined",
                         checked=f"approval for {target}", found="the user declined", decided="skipped",
                         why="mutating and disruptive steps run only with approval")
            deps.view.step_finished(step.id, "declined", "not approved")
            return StepUpdate(decisions=[d], done=[step.id])
    deps.view.step_started(step.id)
    attempts = 1 + (step.retries if step.on_error == "retry" else 0)
    outcome: ActionOutcome | None = None
    for attempt in range(attempts):
        try:
            outcome = _run_step(step, deps, view)
        except SpecdoctorError as exc:
            if isinstance(exc, HostError) and step.on_error == "abort":
                raise
            outcome = ActionOutcome(status="error", summary=str(exc), decisions=[Decision(
                step=step.id, title=step.title, tool=step.tool, status="error", checked=step.title,
                found=redact_text(str(exc)), decided="continued", why=f"error policy {step.on_error}")])
        if outcome.status in ("ok", "no_data", "skipped") or attempt == attempts - 1:
            break
        deps.view.progress(f"{step.id}: retrying after {outcome.status} ({attempt + 1}/{attempts - 1})")
    assert outcome is not None
    deps.view.step_finished(step.id, outcome.status, outcome.summary)
    if outcome.status == "error" and step.on_error == "abort":
        raise StepAborted(f"step {step.id} failed and its policy is abort: {outcome.summary}")
    return outcome.update(step.id)


def compile_playbook(playbook: Playbook, checkpointer: Any = None):
    """A compiled graph: START → step 1 → … → END, with the checkpointer attached."""
    graph: StateGraph = StateGraph(Checkpoint, context_schema=RunDeps)  # type: ignore[arg-type]
    previous = START
    for step in playbook.steps:
        graph.add_node(step.id, make_node(step))
        graph.add_edge(previous, step.id)
        previous = step.id
    graph.add_edge(previous, END)
    return graph.compile(checkpointer=checkpointer)
