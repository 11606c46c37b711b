"""Invalid tool calls as an embedding agent makes them (OpenAI JSON arguments): an error result, nothing executed.

Every built-in tool gets: each required field missing, each field given a value of the wrong type, unknown
field names, non-JSON arguments, a JSON array instead of an object, and an unknown tool name. The host is a
MockHost that records every command: it must record none. (MCP's path is tests/embed/test_mcp.py.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from specdoctor.embed import connect
from specdoctor.host import MockHost
from specdoctor.toolkit import registry

__all__ = ["InvalidCall", "invalid_calls", "run_invalid_campaign"]

_WRONG: list[Any] = [{"nested": ["x"]}, [1, 2], "not-a-number-$(id)", -10**12, None]


@dataclass
class InvalidCall:
    """One call and what came back."""

    tool: str
    arguments: str
    status: str
    ran: int


def invalid_calls() -> list[tuple[str, str]]:
    """(tool, JSON-or-not argument text) pairs that must all be refused before anything runs."""
    out: list[tuple[str, str]] = []
    for spec in registry.all():
        if not spec.fn.__module__.startswith("specdoctor.tools."):
            continue
        schema = spec.input_model.model_json_schema()
        props = schema.get("properties", {})
        required = schema.get("required", [])
        base = {k: _valid_guess(props[k]) for k in required}
        for k in required:
            out.append((spec.name, json.dumps({x: v for x, v in base.items() if x != k})))
        for k, prop in props.items():
            for wrong in _WRONG:
                if _accepts(prop, wrong):
                    continue
                out.append((spec.name, json.dumps({**base, k: wrong})))
        out.append((spec.name, "{not json"))
        out.append((spec.name, "[1, 2, 3]"))
    out.append(("rm_rf_everything", "{}"))
    return out


def _valid_guess(prop: dict[str, Any]) -> Any:
    kinds = {p.get("type") for p in prop.get("anyOf", [prop])}
    return "x" if "string" in kinds else 1 if "integer" in kinds else [] if "array" in kinds else {}


def _accepts(prop: dict[str, Any], value: Any) -> bool:
    kinds = {p.get("type") for p in prop.get("anyOf", [prop])} - {None}
    if not kinds:
        return True  # untyped (Any): every value is valid
    py = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
          "null": type(None)}
    return any(isinstance(value, py[k]) for k in kinds if k in py)


def run_invalid_campaign() -> list[InvalidCall]:
    """Every invalid call through `Client.call_json` with mutations allowed; records what ran."""
    calls: list[str] = []

    def handler(cmd, env, cwd):
        calls.append(str(cmd))
        return 1, "", "the mock host refuses"

    host = MockHost(handler)
    out = []
    with connect(host, allow_mutations=True, run_id="invalid") as client:
        for tool, args in invalid_calls():
            before = len(calls)
            res = json.loads(client.call_json(tool, args))
            out.append(InvalidCall(tool, args, res["status"], len(calls) - before))
    return out
