"""Exports of the registry for other agents: OpenAI function schemas and LangChain StructuredTools."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any, Literal

from specdoctor.toolkit.registry import Effect, ToolRegistry, ToolSpec, registry

__all__ = ["openai_arguments", "openai_schema", "openai_schemas", "langchain_tools", "strict_parameters"]

READ_ONLY: tuple[Effect, ...] = ("read",)

# OpenAI strict mode closes every object, so a map argument (`dict[str, X]`) travels as a list of
# {"key", "value"} entries and an arbitrary JSON object as JSON text; `openai_arguments` turns them back.
MAP_ENTRY = "MapEntry"
JSON_TEXT = "JSONObjectText"
API = Literal["chat", "responses"]


def _close_maps(node: Any) -> Any:
    """The SDK's strict schema with every open object (a map) replaced by a closed encoding of it."""
    if isinstance(node, list):
        return [_close_maps(v) for v in node]
    if not isinstance(node, dict):
        return node
    extra = node.get("additionalProperties")
    if node.get("type") == "object" and not node.get("properties") and extra is not False:
        desc = node.get("description", "")
        if extra is True or extra is None or extra == {}:
            return {"type": "string", "title": JSON_TEXT, "description": (desc + " " if desc else "")
                    + "(a JSON object, written as JSON text)"}
        entry = {"type": "object", "title": MAP_ENTRY, "additionalProperties": False, "required": ["key", "value"],
                 "properties": {"key": {"type": "string"}, "value": _close_maps(extra)}}
        return {"type": "array", "items": entry, "description": (desc + " " if desc else "") + "(as key/value entries)"}
    return {k: _close_maps(v) for k, v in node.items()}


def strict_parameters(spec: ToolSpec) -> dict[str, Any]:
    """The tool's input as an OpenAI strict JSON schema: the SDK's own pydantic helper
    (`openai.pydantic_function_tool`, i.e. `to_strict_json_schema`), maps closed as above."""
    import openai

    tool = openai.pydantic_function_tool(spec.input_model, name=spec.name, description=spec.description[:1024])
    params = _close_maps(copy.deepcopy(dict(tool["function"]["parameters"])))  # type: ignore[typeddict-item]
    params.pop("title", None)
    params.setdefault("properties", {})
    params.setdefault("required", [])
    return params


def openai_schema(spec: ToolSpec, api: API = "chat") -> dict[str, Any]:
    """One tool as an OpenAI tool (strict): Chat Completions' `{"type": "function", "function": {...}}`, or
    with `api="responses"` the Responses API's flat `{"type": "function", "name", ...}`."""
    fn = {"name": spec.name, "description": spec.description[:1024], "parameters": strict_parameters(spec),
          "strict": True}
    return {"type": "function", **fn} if api == "responses" else {"type": "function", "function": fn}


def openai_schemas(effects: Iterable[Effect] | None = None, reg: ToolRegistry = registry,
                   api: API = "chat") -> list[dict[str, Any]]:
    return [openai_schema(s, api) for s in reg.all(effects)]


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return defs.get(ref.rsplit("/", 1)[-1], node) if isinstance(ref, str) else node


def _fits(node: dict[str, Any], value: Any) -> bool:
    t = node.get("type")
    return ((t == "array" and isinstance(value, list)) or (t == "object" and isinstance(value, dict))
            or (t == "string" and isinstance(value, str)) or (t == "null" and value is None)
            or (t in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool))
            or (t == "boolean" and isinstance(value, bool)) or (t is None and "anyOf" not in node))


def _decode(node: dict[str, Any], value: Any, defs: dict[str, Any]) -> Any:
    node = _resolve(node, defs)
    if "anyOf" in node:
        branches = [_resolve(b, defs) for b in node["anyOf"]]
        for b in sorted(branches, key=lambda b: b.get("title") != JSON_TEXT):  # JSON text before a plain string
            if _fits(b, value) and (b.get("title") != JSON_TEXT or _json_object(value) is not None):
                return _decode(b, value, defs)
        return value
    if node.get("title") == JSON_TEXT and isinstance(value, str):
        obj = _json_object(value)
        return value if obj is None else obj
    items = node.get("items")
    if isinstance(items, dict) and isinstance(value, list):
        items = _resolve(items, defs)
        if items.get("title") == MAP_ENTRY and all(isinstance(e, dict) and "key" in e for e in value):
            return {e["key"]: _decode(items["properties"]["value"], e.get("value"), defs) for e in value}
        return [_decode(items, v, defs) for v in value]
    if isinstance(node.get("properties"), dict) and isinstance(value, dict):
        props = node["properties"]
        return {k: _decode(props[k], v, defs) if k in props else v for k, v in value.items()}
    return value


def _json_object(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str) or not text.lstrip().startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def openai_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """A model's arguments for `spec` (strict encoding) as the tool's input model takes them: key/value
    entries back to maps, JSON text back to objects; anything else passes through for the model to validate.
    Already-decoded arguments (a real map) pass through unchanged."""
    params = strict_parameters(spec)
    decoded = _decode(params, arguments, params.get("$defs", {}))
    return decoded if isinstance(decoded, dict) else arguments


def langchain_tools(client: Any, effects: Iterable[Effect] | None = READ_ONLY) -> list[Any]:
    """LangChain StructuredTools that call `client.call(name, **kwargs)` and return the ToolResult as JSON."""
    from langchain_core.tools import StructuredTool

    tools = []
    for spec in client.registry.all(effects):

        def _run(_spec: ToolSpec = spec, **kwargs: Any) -> str:
            return json.dumps(client.call(_spec.name, **kwargs).model_dump(mode="json"))

        tools.append(StructuredTool.from_function(func=_run, name=spec.name, description=spec.description,
                                                  args_schema=spec.input_model))
    return tools
