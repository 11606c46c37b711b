"""The run state checkpointed after every step, and the typed view every reader uses to read it.

Checkpoints keep plain JSON (a tool result is stored as `ToolResult.model_dump(mode="json")` under its step
id). Readers never index those dicts: they ask the view for the tool's own output model, which validates it
against the registry's record of what that tool returns and fails loudly, naming step, tool and field::

    from specdoctor.engine.state import StateView
    from specdoctor.tools.serving.server import Propagation

    view = StateView(state)
    prop = view.result("propagation", Propagation)      # by step id: Propagation | None (None: not run/not ok)
    prop = view.latest(Propagation)                      # or: the last call of whichever tool returns Propagation
    dropped = [r.name for r in prop.rows if r.status == "dropped-for-workers"] if prop else []
    spec = view.fact("measure.spec", Measurement)        # an action's saved fact, validated the same way

A result of the wrong shape raises `ResultShapeError` ("step 'propagation' (tool check_env_propagation):
output field rows.0.status: Input should be ..."), at the line that reads it. An action holding a fresh
`ToolResult` from `call_tool` reads it the same way: `registry.typed_output(res, LaunchResult, where=key)`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, JsonValue, ValidationError

from specdoctor.diagnosis.facts import RunFacts, checked_facts
from specdoctor.errors import UsageError
from specdoctor.models import Decision
from specdoctor.models.view import M, StateReader
from specdoctor.toolkit import ToolResult, registry
from specdoctor.toolkit.registry import ResultShapeError, first_error

__all__ = ["Decision", "FactsJSON", "ResultShapeError", "RunState", "StateReader", "StateView", "merge_dicts",
           "merge_facts"]


def merge_dicts(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: later steps add or replace keys."""
    return {**(a or {}), **(b or {})}


FactsJSON = dict[str, JsonValue]
"""The facts as the checkpoint keeps them: JSON, whose schema is `RunFacts` (checked at every write)."""


def merge_facts(a: FactsJSON | None, b: FactsJSON | None) -> FactsJSON:
    """Reducer of `facts`: later steps add or replace facts, each checked against `RunFacts` as it is written (an
    undeclared name or a wrong shape fails at the step that wrote it, naming the fact and its field)."""
    if b:
        checked_facts(b)
    return {**(a or {}), **(b or {})}


class RunState(TypedDict, total=False):
    """LangGraph state. Values are plain JSON data so checkpoints survive any process."""

    run_id: str
    params: dict[str, Any]
    results: Annotated[dict[str, Any], merge_dicts]
    facts: Annotated[FactsJSON, merge_facts]
    decisions: Annotated[list[dict[str, Any]], operator.add]
    done: Annotated[list[str], operator.add]


class StateView:
    """Typed reads over a state dict (for predicates, actions, the advisor, the report builder, references)."""

    def __init__(self, state: RunState | dict[str, Any]):
        self.state = state

    @property
    def params(self) -> dict[str, Any]:
        return self.state.get("params", {}) or {}

    @property
    def facts(self) -> dict[str, Any]:
        """The recorded facts as JSON (for `$facts` references and `get`); typed: `run_facts`, `fact()`."""
        return self.state.get("facts", {}) or {}

    @property
    def run_facts(self) -> RunFacts:
        """The recorded facts as their typed model (a wrong shape raises `ResultShapeError` naming the fact)."""
        return checked_facts(self.facts)

    # -- tool results ------------------------------------------------------------------------------------

    def keys(self) -> list[str]:
        """The keys tool results are stored under (step ids, and the keys actions chose), in order."""
        return list(self.state.get("results", {}) or {})

    def tool_result(self, key: str) -> ToolResult | None:
        """The whole stored `ToolResult` under `key` (status, summary, evidence), or None."""
        raw = (self.state.get("results", {}) or {}).get(key)
        if raw is None:
            return None
        try:
            return raw if isinstance(raw, ToolResult) else ToolResult.model_validate(raw)
        except ValidationError as exc:
            raise ResultShapeError(f"step {key!r}: stored result is not a ToolResult: {first_error(exc)}") from None

    def result(self, key: str, model: type[M], *, unresolved: bool = False) -> M | None:
        """The output of the tool call stored under `key`, as `model` (the output model of the tool it called).

        None when nothing ran under `key` or the call did not succeed (with `unresolved=True`, an unresolved
        call's partial output counts too). Raises `ResultShapeError` when the tool does not return `model` or
        its stored output does not validate against the registry's output model for that tool.
        """
        tr = self.tool_result(key)
        if tr is None:
            return None
        return self._typed(key, tr, model, unresolved)

    def latest(self, model: type[M], *, unresolved: bool = False) -> M | None:
        """The output of the most recent successful call of a tool that returns `model`, whatever its key."""
        key = self.latest_key(model, unresolved=unresolved)
        return None if key is None else self.result(key, model, unresolved=unresolved)

    def latest_key(self, model: type[BaseModel], *, unresolved: bool = False) -> str | None:
        """The key of the most recent successful call of a tool that returns `model` (for its evidence)."""
        for key, tr in reversed(list(self._calls())):
            if _returns(tr.tool, model) and self._typed(key, tr, model, unresolved) is not None:
                return key
        return None

    def _calls(self) -> Iterator[tuple[str, ToolResult]]:
        for key in self.keys():
            tr = self.tool_result(key)
            if tr is not None:
                yield key, tr

    def _typed(self, key: str, tr: ToolResult, model: type[M], unresolved: bool) -> M | None:
        return registry.typed_output(tr, model, where=key, unresolved=unresolved)

    def output(self, key: str) -> dict[str, Any] | None:
        """The raw JSON output under `key` when the call succeeded. Kept for actions not yet converted;
        new readers use `result()` / `latest()`."""
        tr = self.tool_result(key)
        return tr.output if tr is not None and tr.ok else None

    # -- facts and parameters ------------------------------------------------------------------------------

    def fact(self, path: str, model: type[M]) -> M | None:
        """The fact at dotted `path` (e.g. `measure.spec`) validated through `model`; None when absent."""
        value = self.get(f"facts.{path}")
        if value is None:
            return None
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise ResultShapeError(f"fact {path!r} read as {model.__name__}: field {first_error(exc)}") from None

    def get(self, dotted: str, default: Any = None) -> Any:
        """`params.x`, `facts.a.b`, or `<step_id>.a.b` (the step's output, as JSON: for `$state` references)."""
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


def _returns(tool: str, model: type[BaseModel]) -> bool:
    try:
        return issubclass(registry.get(tool).output_model, model)
    except UsageError:
        return False
