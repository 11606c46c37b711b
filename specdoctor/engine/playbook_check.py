"""What a playbook names, checked before it runs: tools, actions and predicates that exist, arguments they take
(literal values validated now), references to declared parameters and earlier steps' output fields, and facts
saved under names the run's facts declare.

Apart from the models (engine/playbook.py) because it needs the action and tool registries, whose actions in turn
use the models: kept in one module, that was the import circle playbook → actions → conclude → context → playbook.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from specdoctor.diagnosis.facts import RunFacts
from specdoctor.engine.actions.catalogue import ACTIONS
from specdoctor.engine.playbook import STANDARD_PARAMS, Playbook, Step, read_playbook
from specdoctor.engine.predicates import PREDICATES
from specdoctor.errors import UsageError
from specdoctor.toolkit import registry

__all__ = ["check_references", "load_playbook", "problems"]

_SEGMENT = re.compile(r"^(\*|\d+|[A-Za-z_][A-Za-z0-9_-]*)$")  # one part of a $ref


def load_playbook(name_or_path: str) -> Playbook:
    """A built-in playbook by name, or a user's YAML file by path; checked completely before it is returned."""
    playbook = read_playbook(name_or_path)
    check_references(playbook, name_or_path)
    return playbook


def problems(playbook: Playbook) -> list[str]:
    """Every problem of the playbook, each as `step S, key K: what is wrong` (empty: it can run)."""
    known_tools = {t.name for t in registry.all()}
    out: list[str] = [f"prerequisites: unknown predicate {p!r}" for p in playbook.prerequisites if p not in PREDICATES]
    earlier: dict[str, Step] = {}
    for s in playbook.steps:
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
            for msg in _ref_problems(value, playbook, earlier):
                out.append(f"{where}, key args.{key}: {msg}")
        out += [f"{where}, key {key}: {msg}" for key, msg in _save_problems(s, known_tools)]
        earlier[s.id] = s
    return out


def _save_problems(step: Step, known_tools: set[str]) -> Iterator[tuple[str, str]]:
    """`save: {fact: field}`: the fact is one the run declares (RunFacts), the field one the tool returns — caught
    here, not at the write (where merge_facts would refuse an undeclared fact mid-run)."""
    for fact, path in step.save.items():
        if fact not in RunFacts.model_fields:
            yield f"save.{fact}", f"no run fact {fact!r} (declared in diagnosis/facts.py RunFacts)"
        if step.tool in known_tools:
            fields = registry.get(step.tool or "").output_model.model_fields
            head = path.split(".")[0]
            if head not in fields:
                yield f"save.{fact}", f"{step.tool} output has no field {head!r}"

def check_references(playbook: Playbook, source: str | None = None) -> None:
    """Raise a one-line UsageError naming the file, step and key of the first problem (if any)."""
    found = problems(playbook)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise UsageError(f"playbook {source or playbook.name}: {found[0]}{more}")


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
                tool = earlier[target].tool or ""
                try:
                    fields = registry.get(tool).output_model.model_fields
                except UsageError:
                    continue  # an unknown tool is reported on its own step
                if parts[1] not in fields:
                    yield f"{ref!r}: {tool} output has no field {parts[1]!r} (it has: {', '.join(fields)})"
