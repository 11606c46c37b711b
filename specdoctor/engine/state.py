"""The run state checkpointed after every step: typed, with reducers, JSON-able values only."""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, Field

__all__ = ["Decision", "RunState", "merge_dicts", "pick", "StateView"]


def pick(d: Any, *names: str, default: Any = None) -> Any:
    """The first non-None of several keys of a tool's output (outputs grow; readers tolerate either name)."""
    if not isinstance(d, dict):
        return default
    for n in names:
        if d.get(n) is not None:
            return d[n]
    return default


def merge_dicts(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: later steps add or replace keys."""
    return {**(a or {}), **(b or {})}


class Decision(BaseModel):
    """One entry of the decisions log: what was checked, found, decided, and why — with evidence."""

    step: str
    title: str = ""
    tool: str | None = None
    status: str = "ok"
    checked: str = ""
    found: str = ""
    decided: str = ""
    why: str = ""
    evidence: list[str] = Field(default_factory=list, description="Commands run, as shell-quoted strings.")
    llm_made: bool = False
    time: float = Field(default_factory=time.time)


class RunState(TypedDict, total=False):
    """LangGraph state. Values are plain JSON data so checkpoints survive any process."""

    run_id: str
    params: dict[str, Any]
    results: Annotated[dict[str, Any], merge_dicts]
    facts: Annotated[dict[str, Any], merge_dicts]
    decisions: Annotated[list[dict[str, Any]], operator.add]
    done: Annotated[list[str], operator.add]


class StateView:
    """Read helpers over a state dict (for predicates, actions and reference resolution)."""

    def __init__(self, state: RunState | dict[str, Any]):
        self.state = state

    @property
    def params(self) -> dict[str, Any]:
        return self.state.get("params", {}) or {}

    @property
    def facts(self) -> dict[str, Any]:
        return self.state.get("facts", {}) or {}

    def result(self, step_id: str) -> dict[str, Any] | None:
        return (self.state.get("results", {}) or {}).get(step_id)

    def output(self, step_id: str) -> dict[str, Any] | None:
        r = self.result(step_id)
        return r.get("output") if r and r.get("status") == "ok" else None

    def get(self, dotted: str, default: Any = None) -> Any:
        """`params.x`, `facts.a.b`, or `<step_id>.a.b` (the step's output)."""
        head, _, rest = dotted.partition(".")
        if head == "params":
            node: Any = self.params
        elif head == "facts":
            node = self.facts
        else:
            node = self.output(head)
        parts = rest.split(".") if rest else []
        for i, part in enumerate(parts):
            if part == "*" and isinstance(node, list):  # `rows.*.path`: the field of every item
                tail = ".".join(parts[i + 1:])
                return [StateView({"facts": item}).get(f"facts.{tail}") if tail else item for item in node]
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return default
        return default if node is None else node
