"""Resolve step arguments: literals, `$params.X`, `$state.step.path`, `$facts.path` — no eval, no templates."""

from __future__ import annotations

from typing import Any

from specdoctor.engine.state import StateView

__all__ = ["resolve_args"]

_MISSING = object()


def _resolve(value: Any, view: StateView) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        ref = value[1:]
        if ref.startswith("state."):
            return view.get(ref[len("state."):])
        if ref.startswith(("params.", "facts.")):
            return view.get(ref)
        return value
    if isinstance(value, dict):
        if set(value) == {"literal"}:
            return value["literal"]
        return {k: v for k, v in ((k, _resolve(v, view)) for k, v in value.items()) if v is not _MISSING}
    if isinstance(value, list):
        return [_resolve(v, view) for v in value]
    return value


def resolve_args(args: dict[str, Any], view: StateView) -> dict[str, Any]:
    """Arguments with references replaced; references that resolve to None are dropped (tool defaults apply)."""
    out = {}
    for key, value in args.items():
        resolved = _resolve(value, view)
        if resolved is not None:
            out[key] = resolved
    return out
