"""Engine actions: composite playbook steps that orchestrate several tools (reproduce, subtract, conclude).

An action is `fn(deps, view, step, args) -> ActionOutcome`; every tool it calls goes through the
registry, so its commands are recorded as evidence exactly like a plain tool step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.diagnosis.facts import RunFacts
from specdoctor.engine.state import Decision, StepUpdate
from specdoctor.toolkit import ToolContext, ToolResult, registry
from specdoctor.toolkit.registry import Called, InT, OutT, tool_name

__all__ = ["ActionOutcome", "ActionSpec", "Called", "action", "action_spec", "run_tool"]


class ActionOutcome(BaseModel):
    """What a step adds to the record, typed: its tool calls by key, the facts it wrote, its decisions."""

    status: str = "ok"
    summary: str = ""
    results: dict[str, ToolResult] = Field(default_factory=dict)
    facts: RunFacts = Field(default_factory=RunFacts, description="The facts written: the fields set.")
    decisions: list[Decision] = Field(default_factory=list)

    def commands(self, limit: int) -> list[str]:
        """The commands of every tool call this step made so far (evidence for its decision)."""
        return [e.command for r in self.results.values() for e in r.evidence][:limit]

    def update(self, step_id: str) -> StepUpdate:
        """The record's update: this step's calls, facts and decisions, and the step done."""
        return StepUpdate(results=self.results, facts=self.facts, decisions=self.decisions, done=[step_id])


@dataclass(frozen=True)
class ActionSpec:
    """A registered action; `args` names the arguments it reads (None: not declared, so not checked at load)."""

    name: str
    fn: Callable[..., ActionOutcome]
    effect: str
    description: str
    args: tuple[str, ...] | None = None


ACTION_SPEC = "__specdoctor_action__"
"""The attribute `@action` sets on a function: its `ActionSpec`."""


def action(effect: str, args: tuple[str, ...] | None = None
           ) -> Callable[[Callable[..., ActionOutcome]], Callable[..., ActionOutcome]]:
    """Declare an action; `args` lists the step arguments it reads, so a playbook's typo fails at load. It registers
    nothing: the action catalogue (`engine/actions/catalogue.py`) lists the actions a playbook can name."""

    def deco(fn: Callable[..., ActionOutcome]) -> Callable[..., ActionOutcome]:
        setattr(fn, ACTION_SPEC, ActionSpec(fn.__name__, fn, effect,
                                            (fn.__doc__ or "").strip().splitlines()[0], args))
        return fn

    return deco


def action_spec(fn: Callable[..., ActionOutcome]) -> ActionSpec | None:
    """The `@action` declaration of `fn`, None when it has none."""
    spec = getattr(fn, ACTION_SPEC, None)
    return spec if isinstance(spec, ActionSpec) else None


def run_tool(deps: Any, fn: Callable[[ToolContext, InT], OutT], args: InT | dict[str, Any],
             results: dict[str, ToolResult] | None = None, key: str | None = None, *,
             unresolved: bool = False) -> Called[OutT]:
    """Call the tool `fn` for an action (approval already given at step level), keep its result under `key`
    (default: the tool's name) and hand back its output model. `args` is the tool's input model, or its JSON where
    the values come from a playbook or a fact (a bad one is then the call's error result, not a crash)."""
    ctx = dataclasses.replace(deps.tool_ctx, auto_approve=True)
    called = registry.call_fn(ctx, fn, args, where=key, unresolved=unresolved)
    if results is not None:
        results[key or tool_name(fn)] = called.result
    return called
