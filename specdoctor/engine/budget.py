"""`--budget MINUTES`: a launching step that would overrun the user's box minutes is not started.

Box time is counted on the wall clock from the plan (the last read before the user's server may be stopped): on a
real box that is the time its server is down or its GPUs busy. What the next step costs is the plan's expectation
for it (expected launches × one launch measured on this box, runs and stop included), plus putting the user's server
back. Once a step is held back, every later launching step is too (their inputs would be missing); putting the
server back always runs. The report says what was decided, what was not, and how to continue.
"""

from __future__ import annotations

import math
import shlex
import time
from typing import Any

from specdoctor.engine.state import StateView
from specdoctor.models.identity import BudgetFact
from specdoctor.tools.serving.plan import Plan, PlannedPhase

__all__ = ["BUDGET_PARAM", "start_budget", "budget_blocker", "continue_command", "phase_minutes"]

BUDGET_PARAM = "budget_minutes"
_STOP_S = 10.0
_NEVER_HELD = frozenset({"give_back_gpus"})  # putting the user's server back is never held back
# playbook step -> the plan phases it spends (taking the GPUs commits to the first launch and the restart)
_PHASES = {"free_gpus": ("reproduce", "restart"), "reproduce": ("reproduce",), "essentials": ("essentials",),
           "subtract": ("subtract",), "bisect": ("bisect",), "nccl_promote": ("nccl_promote",),
           "attribute": ("attribute",)}


def start_budget(view: StateView, now: float | None = None) -> BudgetFact | None:
    """The budget fact the plan step records (None without --budget)."""
    minutes = view.params.budget_minutes
    if minutes is None:
        return None
    return BudgetFact(minutes=float(minutes), started_at=time.time() if now is None else now)


def phase_minutes(plan: Plan, phase: PlannedPhase, *, expected: bool = True) -> float:
    """A phase's box minutes: launches × (launch + stop + its runs)."""
    n = phase.launches if (phase.expected is None or not expected) else phase.expected
    per = (plan.launch_s or 0.0) + _STOP_S + phase.runs * (plan.run_s or 0.0)
    return n * per / 60.0


def budget_blocker(step: Any, effect: str, view: StateView, now: float | None = None) -> str | None:
    """Why `step` is not started under the budget (None: it runs, or no budget was given)."""
    fact = view.fact("budget", BudgetFact)
    if fact is None or effect != "disrupt" or (step.action or step.tool) in _NEVER_HELD:
        return None
    if fact.stopped_before:
        return f"held back: the budget stopped the run before {fact.stopped_before}"
    plan = view.fact("plan", Plan)
    names = _PHASES.get(step.id, ())
    phases = [p for p in (plan.phases if plan else []) if p.step in names or
              (p.step == "restart" and "reproduce" in names and step.id != "free_gpus")]
    if plan is None or plan.launch_s is None or not phases:
        return None  # nothing to cost it with: the budget cannot judge it, the step runs
    spent = ((time.time() if now is None else now) - fact.started_at) / 60.0
    need = sum(phase_minutes(plan, p) for p in phases if p.step != "restart")
    restart = sum(phase_minutes(plan, p) for p in plan.phases if p.step == "restart")
    if spent + need + restart <= fact.minutes:
        return None
    return (f"budget: {spent:.1f} of {fact.minutes:g} box minutes spent; {step.id} expects {need:.1f} more and "
            f"putting your server back {restart:.1f}")


def continue_command(view: StateView, fact: BudgetFact) -> str:
    """The command that continues with a larger budget: the same investigation, the budget raised to what the
    plan's worst case needs (the steps already decided are re-measured: a fresh run is the only honest one)."""
    plan = view.fact("plan", Plan)
    worst = sum(phase_minutes(plan, p, expected=False) for p in plan.phases) if plan and plan.launch_s else \
        2 * fact.minutes
    p = view.params
    parts = ["specdoctor", "investigate", "--host", fact.host]
    for key, value in (("repo", p.repo), ("python", p.python), ("good_fingerprint", p.good_fingerprint)):
        if value:
            parts += [f"--{key.replace('_', '-')}", str(value)]
    if p.expect:
        parts += ["--expect", ",".join(f"{k}={v:g}" for k, v in p.expect.items())]
    parts += ["--budget", str(max(math.ceil(worst), math.ceil(2 * fact.minutes)))]
    return shlex.join(parts)
