"""Exports of the registry for other agents: OpenAI function schemas and LangChain StructuredTools."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from specdoctor.toolkit.registry import Effect, ToolRegistry, ToolSpec, registry

__all__ = ["openai_schema", "openai_schemas", "langchain_tools"]

READ_ONLY: tuple[Effect, ...] = ("read",)


def _strictable(schema: dict[str, Any]) -> bool:
    """OpenAI strict mode needs every property required and no open-ended objects."""

    def walk(node: Any) -> bool:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                props = node.get("properties", {})
                if set(node.get("required", [])) != set(props):
                    return False
                if node.get("additionalProperties") not in (None, False):
                    return False
            for key in ("default", "format", "pattern", "minLength", "maxLength", "minimum", "maximum"):
                if key in node and key != "default":
                    return False
            return all(walk(v) for v in node.values())
        if isinstance(node, list):
            return all(walk(v) for v in node)
        return True

    return walk(schema)


def _close_objects(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            node["additionalProperties"] = False
        for v in node.values():
            _close_objects(v)
    elif isinstance(node, list):
        for v in node:
            _close_objects(v)


def openai_schema(spec: ToolSpec) -> dict[str, Any]:
    """One tool as an OpenAI function-calling schema (strict when the input model allows it)."""
    params = copy.deepcopy(spec.input_model.model_json_schema())
    params.pop("title", None)
    params.setdefault("properties", {})
    params["type"] = "object"
    strict = _strictable(params)
    if strict:
        _close_objects(params)
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description[:1024], "parameters": params,
                     "strict": strict},
    }


def openai_schemas(effects: Iterable[Effect] | None = None, reg: ToolRegistry = registry) -> list[dict[str, Any]]:
    return [openai_schema(s) for s in reg.all(effects)]


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
