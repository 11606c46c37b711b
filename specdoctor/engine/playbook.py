"""Playbook models: YAML files naming tools/actions, their arguments, named `when` predicates and policies.

A playbook is checked completely when it is loaded, before anything runs: unknown keys, unknown tools,
actions and predicates, arguments a tool does not take (or of the wrong type), required arguments nobody
gives, and references that cannot resolve (`$params.X` not a parameter, `$state.STEP` not an earlier step,
`$state.STEP.field` not a field of that step's tool output). Each problem is one line naming the file, the
step and the key.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specdoctor.errors import UsageError

__all__ = ["Param", "Step", "Playbook", "STANDARD_PARAMS", "read_playbook", "list_playbooks"]

# Parameters every run has (the runner fills them from named options and host hints); a playbook declares
# any other parameter it references under `parameters:`.
STANDARD_PARAMS = frozenset({"repo", "python", "launch", "expect", "essential", "patch_script",
                             "good_fingerprint", "port"})


class _Yaml(BaseModel):
    """What a user writes in YAML: a misspelled key is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


class Param(_Yaml):
    """A playbook parameter; CLI options and `--param NAME=VALUE` fill it."""

    default: Any = None
    description: str = ""


class Step(_Yaml):
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


class Playbook(_Yaml):
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


def list_playbooks() -> list[str]:
    """Names of the built-in playbooks."""
    root = resources.files("specdoctor.playbooks")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def _step_id(data: Any, loc: tuple[Any, ...]) -> str | None:
    """The id of the step a validation error points into (`steps.3.on_eror` → that step's id)."""
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int) and isinstance(data, dict):
        steps = data.get("steps")
        if isinstance(steps, list) and loc[1] < len(steps) and isinstance(steps[loc[1]], dict):
            return str(steps[loc[1]].get("id") or f"#{loc[1] + 1}")
        return f"#{loc[1] + 1}"
    return None


def _schema_error(source: str, data: Any, exc: ValidationError) -> UsageError:
    """One line: the file, the step and the key of the first problem, in words."""
    errors = exc.errors()
    first = errors[0]
    loc = tuple(first["loc"])
    step = _step_id(data, loc)
    key = ".".join(str(p) for p in (loc[2:] if step else loc)) or "(step)"
    msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    if first["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    where = f"step {step}, key {key}" if step else f"key {key}"
    return UsageError(f"playbook {source}: {where}: {msg}{more}")


def read_playbook(name_or_path: str) -> Playbook:
    """A built-in playbook by name, or a user's YAML file by path, checked against the schema only; what it names
    (tools, actions, predicates, references) is checked by `engine.playbook_check.load_playbook`."""
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
        playbook = Playbook.model_validate(data)
    except ValidationError as exc:
        raise _schema_error(name_or_path, data, exc) from None
    return playbook
