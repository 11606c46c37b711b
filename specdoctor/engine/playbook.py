"""Playbook models: YAML files naming tools/actions, their arguments, named `when` predicates and policies."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from specdoctor.errors import UsageError

__all__ = ["Param", "Step", "Playbook", "load_playbook", "list_playbooks"]


class Param(BaseModel):
    """A playbook parameter; CLI options and `--param NAME=VALUE` fill it."""

    default: Any = None
    description: str = ""


class Step(BaseModel):
    """One step: a registered tool or an engine action, with arguments and policies.

    Arguments are literals, or references: a string `$params.NAME` (a playbook parameter) or
    `$state.a.b.c` (a value produced by an earlier step, e.g. `$state.catalog.files`). Nothing is evaluated.
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = ""
    tool: str | None = None
    action: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    when: str | None = Field(default=None, description="Name of a predicate from the predicate registry.")
    approval: Literal["auto", "ask", "never"] = Field(
        default="auto", description="auto: ask only for mutate/disrupt tools; ask: always; never: no prompt.")
    on_error: Literal["abort", "continue", "retry"] = "continue"
    retries: int = Field(default=1, ge=0, le=5, description="Extra attempts when on_error is retry.")
    save: dict[str, str] = Field(
        default_factory=dict, description="Facts to keep from a tool's output: {fact_name: dotted.path.in.output}.")

    @model_validator(mode="after")
    def _one_target(self) -> Step:
        if self.id in ("params", "facts", "state"):
            raise ValueError(f"step id {self.id!r} is reserved (it would shadow ${self.id}.… references)")
        if bool(self.tool) == bool(self.action):
            raise ValueError(f"step {self.id!r} must name exactly one of tool / action")
        return self


class Playbook(BaseModel):
    """A named, validated sequence of steps."""

    name: str
    description: str = ""
    parameters: dict[str, Param] = Field(default_factory=dict)
    prerequisites: list[str] = Field(default_factory=list, description="Predicate names that must hold first.")
    steps: list[Step]

    @model_validator(mode="after")
    def _unique_ids(self) -> Playbook:
        ids = [s.id for s in self.steps]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"duplicate step ids: {sorted(dup)}")
        return self

    def check_references(self) -> None:
        """Fail early on unknown tools, actions and predicates (a playbook is checked before it runs)."""
        from specdoctor.engine.actions import ACTIONS
        from specdoctor.engine.predicates import PREDICATES
        from specdoctor.toolkit import registry

        known_tools = {t.name for t in registry.all()}
        problems = []
        for s in self.steps:
            if s.tool and s.tool not in known_tools:
                problems.append(f"step {s.id}: unknown tool {s.tool!r}")
            if s.action and s.action not in ACTIONS:
                problems.append(f"step {s.id}: unknown action {s.action!r}")
            if s.when and s.when not in PREDICATES:
                problems.append(f"step {s.id}: unknown predicate {s.when!r}")
        for p in self.prerequisites:
            if p not in PREDICATES:
                problems.append(f"prerequisite: unknown predicate {p!r}")
        if problems:
            raise UsageError(f"playbook {self.name}: " + "; ".join(problems))


def list_playbooks() -> list[str]:
    """Names of the built-in playbooks."""
    root = resources.files("specdoctor.playbooks")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_playbook(name_or_path: str) -> Playbook:
    """A built-in playbook by name, or a user's YAML file by path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UsageError(f"playbook file not found: {name_or_path}")
        text = path.read_text(encoding="utf-8")
    else:
        res = resources.files("specdoctor.playbooks").joinpath(f"{name_or_path}.yaml")
        if not res.is_file():
            raise UsageError(f"unknown playbook {name_or_path!r} (built-in: {', '.join(list_playbooks())})")
        text = res.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"playbook {name_or_path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return Playbook.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"playbook {name_or_path} is invalid at {loc}: {first['msg']}") from None
