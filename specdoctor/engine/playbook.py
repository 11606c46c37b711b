"""Playbook models: YAML files naming tools/actions, their arguments, named `when` predicates and policies.

A playbook is checked completely when it is loaded, before anything runs: unknown keys, unknown tools,
actions and predicates, arguments a tool does not take (or of the wrong type), required arguments nobody
gives, and references that cannot resolve (`$params.X` not a parameter, `$state.STEP` not an earlier step,
`$state.STEP.field` not a field of that step's tool output). Each problem is one line naming the file, the
step and the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specdoctor.errors import UsageError

__all__ = ["Param", "Step", "Playbook", "STANDARD_PARAMS", "load_playbook", "list_playbooks"]

# Parameters every run has (the runner fills them from named options and host hints); a playbook declares
# any other parameter it references under `parameters:`.
STANDARD_PARAMS = frozenset({"repo", "python", "launch", "expect", "essential", "patch_script",
                             "good_fingerprint", "port"})

_SEGMENT = re.compile(r"^(\*|\d+|[A-Za-z_][A-Za-z0-9_-]*)$")


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

    def problems(self) -> list[str]:
        """Every problem of the playbook, each as `step S, key K: what is wrong` (empty: it can run)."""
        from specdoctor.engine.actions import ACTIONS
        from specdoctor.engine.predicates import PREDICATES
        from specdoctor.toolkit import registry

        known_tools = {t.name for t in registry.all()}
        out: list[str] = [f"prerequisites: unknown predicate {p!r}" for p in self.prerequisites if p not in PREDICATES]
        earlier: dict[str, Step] = {}
        for s in self.steps:
            where = f"step {s.id}"
            if s.tool and s.tool not in known_tools:
                out.append(f"{where}, key tool: unknown tool {s.tool!r} (see `specdoctor tools list`)")
            if s.action and s.action not in ACTIONS:
                out.append(f"{where}, key action: unknown action {s.action!r} (known: {', '.join(sorted(ACTIONS))})")
            if s.when and s.when not in PREDICATES:
                out.append(f"{where}, key when: unknown predicate {s.when!r}")
            for key, msg in _arg_problems(s, known_tools, ACTIONS):
                out.append(f"{where}, key {key}: {msg}")
            for key, value in s.args.items():
                for msg in _ref_problems(value, self, earlier):
                    out.append(f"{where}, key args.{key}: {msg}")
            if s.tool in known_tools:
                fields = registry.get(s.tool).output_model.model_fields
                for fact, path in s.save.items():
                    head = path.split(".")[0]
                    if head not in fields:
                        out.append(f"{where}, key save.{fact}: {s.tool} output has no field {head!r}")
            earlier[s.id] = s
        return out

    def check_references(self, source: str | None = None) -> None:
        """Raise a one-line UsageError naming the file, step and key of the first problem (if any)."""
        problems = self.problems()
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UsageError(f"playbook {source or self.name}: {problems[0]}{more}")


def _literal(value: Any) -> tuple[bool, Any]:
    """(is it free of references, its value with `{literal: x}` unwrapped)."""
    if isinstance(value, str) and value.startswith("$"):
        return False, value
    if isinstance(value, dict):
        if set(value) == {"literal"}:
            return True, value["literal"]
        items = {k: _literal(v) for k, v in value.items()}
        return all(ok for ok, _ in items.values()), {k: v for k, (_, v) in items.items()}
    if isinstance(value, list):
        items_l = [_literal(v) for v in value]
        return all(ok for ok, _ in items_l), [v for _, v in items_l]
    return True, value


def _arg_problems(step: Step, known_tools: set[str], actions: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Argument names against the tool's input model (or the action's declared arguments); literal values too."""
    if step.action:
        yield from _action_arg_problems(step, actions)
        return
    if step.tool not in known_tools:
        return
    from specdoctor.toolkit import registry

    model = registry.get(step.tool or "").input_model
    fields = model.model_fields
    names = {n for n in fields} | {f.alias for f in fields.values() if f.alias}
    for key in step.args:
        if key not in names:
            yield f"args.{key}", f"{step.tool} takes no argument {key!r} (it takes: {', '.join(fields)})"
    for name, f in fields.items():
        if f.is_required() and name not in step.args and (f.alias or name) not in step.args:
            yield f"args.{name}", f"{step.tool} needs argument {name!r} and the step does not give it"
    yield from _literal_problems(step, model, names)


def _action_arg_problems(step: Step, actions: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """An argument the action does not declare (an action declaring none is not checked)."""
    spec = actions.get(step.action or "")
    allowed = getattr(spec, "args", None)
    if allowed is None:
        return
    for key in step.args:
        if key not in allowed:
            yield f"args.{key}", (f"action {step.action} takes no argument {key!r}"
                                  + (f" (it takes: {', '.join(allowed)})" if allowed else ""))


def _literal_problems(step: Step, model: type[BaseModel], names: set[str]) -> Iterator[tuple[str, str]]:
    """The literal values (no reference) validated against the tool's input model now, not when the step runs."""
    literals = {}
    for k, v in step.args.items():
        ok, value = _literal(v)
        if ok and k in names:
            literals[k] = value
    try:
        model.model_validate(literals)
    except ValidationError as exc:
        for e in exc.errors():
            if e["type"] == "missing" or not e["loc"] or e["loc"][0] not in literals:
                continue  # given by a reference (checked when it resolves) or reported above
            loc = ".".join(str(p) for p in e["loc"])
            yield f"args.{loc}", f"{e['msg']} (got {e.get('input')!r})"


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value.startswith("$"):
        yield value
    elif isinstance(value, dict) and set(value) != {"literal"}:
        for v in value.values():
            yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


def _ref_problems(value: Any, playbook: Playbook, earlier: dict[str, Step]) -> Iterator[str]:
    """Each reference's shape: a declared parameter, an earlier step (and a field its tool returns), a fact path."""
    for ref in _refs(value):
        kind, _, rest = ref[1:].partition(".")
        parts = rest.split(".") if rest else []
        if kind not in ("params", "state", "facts"):
            yield f"{ref!r} is not a reference ($params.X, $state.STEP.path, $facts.path); " \
                  "write {literal: ...} for a string starting with $"
            continue
        if not parts or not all(_SEGMENT.match(p) for p in parts):
            yield f"{ref!r} is not a well-formed reference (dotted names, `*` or list indices after ${kind}.)"
            continue
        if kind == "params" and parts[0] not in playbook.parameters and parts[0] not in STANDARD_PARAMS:
            yield (f"{ref!r} names no parameter (declare {parts[0]!r} under `parameters:`; standard: "
                   f"{', '.join(sorted(STANDARD_PARAMS))})")
        elif kind == "state":
            target = parts[0]
            if target not in earlier:
                later = any(s.id == target for s in playbook.steps)
                yield (f"{ref!r} refers to step {target!r}, which runs later" if later else
                       f"{ref!r} refers to no step {target!r}") + " ($state may only name an earlier step)"
            elif len(parts) > 1 and earlier[target].tool:
                from specdoctor.toolkit import registry

                tool = earlier[target].tool or ""
                try:
                    fields = registry.get(tool).output_model.model_fields
                except UsageError:
                    continue  # an unknown tool is reported on its own step
                if parts[1] not in fields:
                    yield f"{ref!r}: {tool} output has no field {parts[1]!r} (it has: {', '.join(fields)})"


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


def load_playbook(name_or_path: str) -> Playbook:
    """A built-in playbook by name, or a user's YAML file by path; checked completely before it is returned."""
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
    playbook.check_references(name_or_path)
    return playbook
