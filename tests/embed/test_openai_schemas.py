"""Every tool's OpenAI schema, checked with the openai SDK's own request types and JSON Schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.shared import FunctionDefinition
from pydantic import TypeAdapter

from specdoctor.embed import Client
from specdoctor.host import MockHost
from specdoctor.toolkit import ToolSpec, registry
from specdoctor.tools import as_openai

_ALL = registry.all()
_ADAPTER = TypeAdapter(ChatCompletionFunctionToolParam)


def _closed_and_required(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is False
            assert set(node.get("required", [])) == set(node.get("properties", {}))
        for v in node.values():
            _closed_and_required(v)
    elif isinstance(node, list):
        for v in node:
            _closed_and_required(v)


@pytest.mark.parametrize("spec", _ALL, ids=[s.name for s in _ALL])
def test_every_schema_is_accepted_by_the_openai_types(spec: ToolSpec) -> None:
    [schema] = [s for s in as_openai(effects=[spec.effect]) if s["function"]["name"] == spec.name]
    _ADAPTER.validate_python(schema)
    fn = FunctionDefinition.model_validate(schema["function"])
    assert fn.name == spec.name and fn.description
    params = schema["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    assert params["type"] == "object"
    if fn.strict:
        _closed_and_required(params)


def test_as_openai_follows_the_client_effects() -> None:
    read_only = Client(MockHost(lambda *a: ""))
    assert {s["function"]["name"] for s in as_openai(read_only)} == {s.name for s in registry.all(["read"])}
    everything = Client(MockHost(lambda *a: ""), allow_mutations=True)
    assert {s["function"]["name"] for s in as_openai(everything)} == {s.name for s in _ALL}
    assert len(as_openai()) == len(registry.all(["read"]))  # no client: read-only
    assert any(s.effect != "read" for s in _ALL), "mutating tools should be registered"
