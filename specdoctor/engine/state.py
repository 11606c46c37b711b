"""The run record: typed while a run reads and writes it, JSON only at the checkpoint edge.

LangGraph checkpoints the run after every step; its strict serde keeps JSON only (a checkpoint resumes in any
process). `Checkpoint` is that JSON (the graph's channel schema). Everything else reads and writes `RunState`, the
typed record: parameters, every tool call's `ToolResult` (holding the tool's own output model), the facts as
`RunFacts` and the decisions. A node turns the checkpoint into the record once (`RunState.from_checkpoint`, or the
record the same process already holds for it) and returns its update as JSON (`StepUpdate.to_checkpoint`)::

    from specdoctor.engine.state import StateView
    from specdoctor.tools.serving.server import Propagation

    view = StateView(state)                              # a RunState (or a checkpoint, read once)
    prop = view.result("propagation", Propagation)      # by step id: Propagation | None (None: not run/not ok)
    prop = view.latest(Propagation)                      # or: the last call of whichever tool returns Propagation
    spec = view.fact("measure.spec", Measurement)        # a recorded fact, typed (view.run_facts: all of them)

A result of the wrong shape raises `ResultShapeError` ("step 'propagation' (tool check_env_propagation):
output field rows.0.status: Input should be ..."), at the line that reads it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, Field, JsonValue, RootModel, ValidationError

from specdoctor.diagnosis.facts import RunFacts, checked_facts
from specdoctor.engine.params import recorded_params
from specdoctor.errors import UsageError
from specdoctor.models import Decision
from specdoctor.models.run_params import RunParams
from specdoctor.models.view import M, StateReader
from specdoctor.toolkit import ToolResult, registry
from specdoctor.toolkit.registry import ResultShapeError, first_error

__all__ = ["Checkpoint", "Decision", "FactsJSON", "ResultShapeError", "RunState", "StateReader", "StateView",
           "StepUpdate", "facts_json", "merge_dicts", "merge_facts"]


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


class Checkpoint(TypedDict, total=False):
    """The run as LangGraph checkpoints it (the graph's channel schema): plain JSON, so it resumes in any process."""

    run_id: str
    params: dict[str, Any]
    results: Annotated[dict[str, Any], merge_dicts]
    facts: Annotated[FactsJSON, merge_facts]
    decisions: Annotated[list[dict[str, Any]], operator.add]
    done: Annotated[list[str], operator.add]


def facts_json(facts: RunFacts) -> FactsJSON:
    """The facts a record holds, as the checkpoint keeps them: every fact written, whole (a writer's richer model
    keeps its own fields: `serialize_as_any`)."""
    return facts.model_dump(mode="json", include=set(facts.model_fields_set), serialize_as_any=True)


class StepUpdate(BaseModel):
    """What one step adds to the record: tool calls by key, facts written (the fields set), decisions, done."""

    results: dict[str, ToolResult] = Field(default_factory=dict)
    facts: RunFacts = Field(default_factory=RunFacts)
    decisions: list[Decision] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)

    def to_checkpoint(self) -> dict[str, Any]:
        """The update as the graph's reducers take it (JSON)."""
        return {"results": {k: r.model_dump(mode="json") for k, r in self.results.items()},
                "facts": facts_json(self.facts), "decisions": [d.model_dump(mode="json") for d in self.decisions],
                "done": list(self.done)}


def _params_of(raw: Any) -> RunParams:
    return raw if isinstance(raw, RunParams) else recorded_params(dict(raw or {}))


class RunState(BaseModel):
    """The run record, typed: parameters, tool calls, facts, decisions, steps done."""

    run_id: str = ""
    params: RunParams = Field(default_factory=RunParams, description="The run's parameters, typed.")
    results: dict[str, ToolResult] = Field(default_factory=dict, description="Every tool call, by step id or "
                                           "the key its action chose.")
    facts: RunFacts = Field(default_factory=RunFacts)
    decisions: list[Decision] = Field(default_factory=list)
    done: list[str] = Field(default_factory=list)

    @classmethod
    def from_checkpoint(cls, cp: Mapping[str, Any]) -> RunState:
        """The record a checkpoint holds (a wrong fact names itself; a result that is no `ToolResult`, its key)."""
        results: dict[str, ToolResult] = {}
        for key, raw in (cp.get("results") or {}).items():
            try:
                results[key] = raw if isinstance(raw, ToolResult) else ToolResult.model_validate(raw)
            except ValidationError as exc:
                raise ResultShapeError(f"step {key!r}: stored result is not a ToolResult: {first_error(exc)}"
                                       ) from None
        return cls.model_construct(
            run_id=str(cp.get("run_id") or ""), params=_params_of(cp.get("params")), results=results,
            facts=checked_facts(dict(cp.get("facts") or {})),
            decisions=[d if isinstance(d, Decision) else Decision.model_validate(d) for d in cp.get("decisions") or []],
            done=list(cp.get("done") or []))

    def to_checkpoint(self) -> Checkpoint:
        """The record as JSON, as the graph keeps it."""
        whole = StepUpdate(results=self.results, facts=self.facts, decisions=self.decisions, done=self.done)
        return Checkpoint(run_id=self.run_id, params=self.params.to_json(), **whole.to_checkpoint())  # type: ignore[typeddict-item]

    def apply(self, update: StepUpdate) -> RunState:
        """The record after `update`, merged as the graph's reducers merge it (keys and facts replaced, the rest
        appended)."""
        written = {name: getattr(update.facts, name) for name in update.facts.model_fields_set}
        return RunState.model_construct(
            run_id=self.run_id, params=self.params, results={**self.results, **update.results},
            facts=self.facts.model_copy(update=written), decisions=[*self.decisions, *update.decisions],
            done=[*self.done, *update.done])


class StateView:
    """Typed reads over the run record (for predicates, actions, the advisor, the report builder, references)."""

    def __init__(self, state: RunState | Mapping[str, Any]):
        self.record = state if isinstance(state, RunState) else RunState.from_checkpoint(state)
        self._facts_json: FactsJSON | None = None

    @property
    def params(self) -> RunParams:
        return self.record.params

    @property
    def facts(self) -> dict[str, Any]:
        """The recorded facts as JSON, for playbook `$facts` references and `get` (typed: `run_facts`, `fact()`)."""
        if self._facts_json is None:
            self._facts_json = facts_json(self.record.facts)
        return self._facts_json

    @property
    def run_facts(self) -> RunFacts:
        """The recorded facts as their typed model, for reads (a shallow copy: setting a fact on it never reaches the
        record; its values are the record's own, so change none of them: `fact()` hands out deep copies)."""
        return self.record.facts.model_copy()

    # -- tool results ------------------------------------------------------------------------------------

    def keys(self) -> list[str]:
        """The keys tool results are stored under (step ids, and the keys actions chose), in order."""
        return list(self.record.results)

    def tool_result(self, key: str) -> ToolResult | None:
        """The whole stored `ToolResult` under `key` (status, summary, evidence), or None."""
        return self.record.results.get(key)

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
        yield from self.record.results.items()

    def _typed(self, key: str, tr: ToolResult, model: type[M], unresolved: bool) -> M | None:
        return registry.typed_output(tr, model, where=key, unresolved=unresolved)

    def output(self, key: str) -> dict[str, Any] | None:
        """The raw JSON output under `key` when the call succeeded (for `$state` references and `get`)."""
        tr = self.tool_result(key)
        return tr.output if tr is not None and tr.ok else None

    # -- facts and parameters ------------------------------------------------------------------------------

    def fact(self, path: str, model: type[M]) -> M | None:
        """The fact at dotted `path` (e.g. `measure.spec`) as `model`; None when absent. A copy: a reader's change
        never reaches the record (write it back through the step's update)."""
        node: Any = self.record.facts
        for part in path.split("."):
            if isinstance(node, RootModel):
                node = node.root
            if isinstance(node, BaseModel):
                node = getattr(node, part, None) if part in type(node).model_fields else (
                    (node.model_extra or {}).get(part))
            elif isinstance(node, dict):
                node = node.get(part)
            else:
                return None
            if node is None:
                return None
        if isinstance(node, model):
            return node.model_copy(deep=True)
        try:
            return model.model_validate(node.model_dump(mode="json", serialize_as_any=True)
                                        if isinstance(node, BaseModel) else node)
        except ValidationError as exc:
            raise ResultShapeError(f"fact {path!r} read as {model.__name__}: field {first_error(exc)}") from None

    def get(self, dotted: str, default: Any = None) -> Any:
        """`params.x`, `facts.a.b`, or `<step_id>.a.b` (the step's output, as JSON: for `$state` references)."""
        head, _, rest = dotted.partition(".")
        if head == "params":
            node: Any = self.params.to_json()
        elif head == "facts":
            node = self.facts
        else:
            node = self.output(head)
        return _walk(node, rest.split(".") if rest else [], default)


def _walk(node: Any, parts: list[str], default: Any) -> Any:
    """A JSON value's `a.b.0.c` (`*` on a list: that path of every item)."""
    for i, part in enumerate(parts):
        if part == "*" and isinstance(node, list):  # `rows.*.path`: the field of every item
            tail = parts[i + 1:]
            return [_walk(item, tail, None) if tail else item for item in node]
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
