"""All tool schemas pass OpenAI's strict-mode rules; strict-encoded arguments come back as the tool takes
them; every OpenAI tool-call shape is answered; the LLM advisor's structured outputs; the Responses loop."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from specdoctor.advisor.llm import LLMAdvisor, Narrative
from specdoctor.embed import Client
from specdoctor.models.run_params import RunParams
from specdoctor.toolkit import ToolSpec, registry
from specdoctor.toolkit.exports import openai_arguments, openai_schema

from .openai_stub import OpenAIStub, Reply, ToolCall
from .test_examples import _check, _example

_ALL = registry.all()

# OpenAI's structured-outputs rules (platform docs, "Supported schemas"): the keywords a strict schema may
# use, objects closed with every property required, no allOf/not/if-then, the root an object, at most 10
# levels of nesting and 5000 properties.
_ALLOWED = {"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "const", "$ref",
            "$defs", "description", "title", "default", "pattern", "format", "minimum", "maximum",
            "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"}
_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}


def strict_violations(schema: dict[str, Any]) -> list[str]:
    """Every place `schema` breaks OpenAI's strict-mode rules (empty: it is accepted)."""
    out: list[str] = []
    counts = {"properties": 0}

    def walk(node: Any, path: str, depth: int, keys_are_names: bool) -> None:
        if isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}/{i}", depth, False)
            return
        if not isinstance(node, dict):
            return
        if keys_are_names:  # the values of `properties` / `$defs` are schemas, their keys names
            for k, v in node.items():
                walk(v, f"{path}/{k}", depth, False)
            return
        out.extend(f"{path}: {k} is not supported" for k in node if k not in _ALLOWED)
        types = node.get("type")
        for t in types if isinstance(types, list) else [types] if types else []:
            if t not in _TYPES:
                out.append(f"{path}: type {t}")
        if types == "object" or "properties" in node:
            counts["properties"] += len(node.get("properties", {}))
            if node.get("additionalProperties") is not False:
                out.append(f"{path}: object not closed (additionalProperties must be false)")
            if set(node.get("required", [])) != set(node.get("properties", {})):
                out.append(f"{path}: not every property is required")
            if depth > 10:
                out.append(f"{path}: nested deeper than 10 levels")
        for k, v in node.items():
            walk(v, f"{path}/{k}", depth + (k == "properties"), k in ("properties", "$defs"))

    if schema.get("type") != "object" or "anyOf" in schema:
        out.append("root: must be an object, not anyOf")
    walk(schema, "", 1, False)
    if counts["properties"] > 5000:
        out.append("more than 5000 properties")
    return out


def test_the_rule_checker_can_fail() -> None:  # the rules above must catch what a lax schema does
    lax = {"type": "object", "properties": {"a": {"type": "string", "minLength": 2},
                                            "m": {"type": "object", "additionalProperties": {"type": "string"}}},
           "required": ["a"]}
    found = " ".join(strict_violations(lax))
    assert "minLength" in found and "not closed" in found and "not every property" in found


@pytest.mark.parametrize("spec", _ALL, ids=[s.name for s in _ALL])
def test_every_tool_is_strict_by_openais_rules(spec: ToolSpec) -> None:
    chat = openai_schema(spec)
    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(chat)
    assert chat["function"]["strict"] is True
    assert strict_violations(chat["function"]["parameters"]) == []
    responses = openai_schema(spec, api="responses")
    TypeAdapter(FunctionToolParam).validate_python(responses)
    assert responses["strict"] is True and responses["name"] == spec.name
    assert responses["parameters"] == chat["function"]["parameters"]


def test_all_25_tools_are_strict() -> None:
    assert len(_ALL) >= 25 and all(openai_schema(s)["function"]["strict"] for s in _ALL)


def test_map_arguments_round_trip_through_the_strict_encoding() -> None:
    launch = registry.get("launch_server")
    assert "env" in launch.input_model.model_fields
    encoded = {"command": "python -m sglang.launch_server --model-path m",
               "env": [{"key": "NCCL_ALGO", "value": "Ring"}, {"key": "SGLANG_X", "value": "1"}]}
    decoded = openai_arguments(launch, encoded)
    assert decoded["env"] == {"NCCL_ALGO": "Ring", "SGLANG_X": "1"}
    launch.input_model.model_validate(decoded)  # what the tool accepts
    assert openai_arguments(launch, decoded) == decoded  # already a map: unchanged
    diff = registry.get("fingerprint_diff")
    got = openai_arguments(diff, {"a": json.dumps({"nccl": "2.27"}), "b": "/srv/good.json"})
    assert got["a"] == {"nccl": "2.27"} and got["b"] == "/srv/good.json"  # JSON text vs a path


def test_tool_message_accepts_every_tool_call_shape(seed: Client) -> None:
    args = json.dumps({"repo": seed.hints.repo, "max_hunk_chars": 0})
    as_dict = seed.openai_tool_message({"id": "call_9", "type": "function",
                                        "function": {"name": "catalog_diffs", "arguments": args}})
    assert as_dict["role"] == "tool" and as_dict["tool_call_id"] == "call_9"
    assert json.loads(as_dict["content"])["status"] == "ok"
    responses = seed.openai_tool_message({"type": "function_call", "call_id": "call_10", "name": "catalog_diffs",
                                          "arguments": args})
    assert responses["type"] == "function_call_output" and responses["call_id"] == "call_10"
    assert json.loads(responses["output"])["status"] == "ok"
    broken = seed.openai_tool_message({"id": "c", "function": {"name": "catalog_diffs", "arguments": "{oops"}})
    assert json.loads(broken["content"])["status"] == "error"
    with pytest.raises(TypeError):
        seed.openai_tool_message({"type": "custom_tool_call", "name": "x"})


def _advisor(llm: OpenAIStub) -> LLMAdvisor:
    return LLMAdvisor("stub-model", client=OpenAI(base_url=llm.base_url, api_key="stub", max_retries=0))


def test_advisor_uses_structured_outputs_and_treats_refusal_or_garbage_as_no_advice() -> None:
    good = {"summary": "Baseline is 8 % below the claim.", "caveats": ["one box"]}
    script = [Reply(content=json.dumps(good)), Reply(content=None, refusal="I can't help with that."),
              Reply(content='{"summary": "cut'), Reply(content='{"caveats": []}'),
              Reply(content="x", finish_reason="length")]
    with OpenAIStub(script) as llm:
        adv = _advisor(llm)
        outs = [adv._structured(Narrative, "s", "u") for _ in range(5)]
    assert outs[0] == Narrative(**good)
    assert outs[1:] == [None, None, None, None]  # refusal, broken JSON, missing field, cut by length
    rf = llm.requests[0]["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["name"] == "Narrative" and strict_violations(rf["json_schema"]["schema"]) == []


def test_advisor_explore_decodes_strict_map_arguments() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    class _Res:
        summary, status = "ok", "ok"

        def model_dump(self, mode: str = "json") -> dict[str, Any]:
            return {"status": "ok"}

    def call_read_tool(name: str, args: dict[str, Any]) -> _Res:
        seen.append((name, args))
        return _Res()

    class _View:
        facts: dict[str, Any] = {}
        params = RunParams()

    script = [Reply.calls(ToolCall(name="check_env_propagation",
                                   arguments={"shell_env": [{"key": "NCCL_ALGO", "value": "Ring"}]})),
              Reply(content="done")]
    with OpenAIStub(script) as llm:
        trail = _advisor(llm).explore(_View(), call_read_tool, [])  # type: ignore[arg-type]
    assert seen == [("check_env_propagation", {"shell_env": {"NCCL_ALGO": "Ring"}})]
    assert trail[-1]["summary"] == "done"


def test_responses_api_loop_example(seed: Client) -> None:
    def first(body: dict[str, Any]) -> Reply:
        offered = {t["name"] for t in body["tools"]}
        assert "catalog_diffs" in offered and "stash_all" not in offered
        assert all(t["type"] == "function" and t["strict"] is True for t in body["tools"])
        prompt = body["input"][0]["content"]
        repo = prompt.split("checkout is at ")[1].split(";")[0]
        return Reply.calls(ToolCall(name="catalog_diffs", arguments={"repo": repo, "max_hunk_chars": 2000}))

    def second(body: dict[str, Any]) -> Reply:
        call, output = body["input"][-2], body["input"][-1]
        assert call["type"] == "function_call" and output["type"] == "function_call_output"
        assert output["call_id"] == call["call_id"] == "call_1"
        files = [f for f in json.loads(output["output"])["output"]["files"] if not f.get("untracked")]
        return Reply(content=f"{len(files)} locally modified files; start with the triage.")

    with OpenAIStub([first, second]) as llm:
        out = _example("openai_responses_loop").run(seed.host, model="stub-model", base_url=llm.base_url)
    _check(out, llm)
