"""What a reader of a run's state (predicates, the advisor, the report builder) may ask: typed reads only."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from specdoctor.models.run_params import RunParams

__all__ = ["M", "StateReader"]

M = TypeVar("M", bound=BaseModel)


class StateReader(Protocol):
    """A read-only view of a run's state; `specdoctor.engine.state.StateView` implements it.

    Tool results come back as the tool's own output model, validated where they are read: a result of the
    wrong shape raises `ResultShapeError` naming the step, the tool and the field.
    """

    @property
    def params(self) -> RunParams:
        """The playbook parameters of the run."""
        ...

    @property
    def facts(self) -> dict[str, Any]:
        """The facts actions saved, as JSON (prefer `fact(path, Model)`)."""
        ...

    def result(self, key: str, model: type[M], *, unresolved: bool = False) -> M | None:
        """The output of the tool call stored under `key` (a step id, or an action's key), as `model`."""
        ...

    def latest(self, model: type[M], *, unresolved: bool = False) -> M | None:
        """The output of the last tool call whose output model is `model` (whatever its step id)."""
        ...

    def fact(self, path: str, model: type[M]) -> M | None:
        """The fact at dotted `path` (e.g. `measure.spec`), validated through `model`."""
        ...

    def get(self, dotted: str, default: Any = None) -> Any:
        """`params.x` or `facts.a.b`: plain values an action saved (not tool results)."""
        ...
