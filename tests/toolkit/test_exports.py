"""Exports of the registry: OpenAI schemas (checked with the openai SDK's own types), LangChain tools, CLI."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from langchain_core.tools import StructuredTool
from openai.types.chat import ChatCompletionToolParam
from openai.types.shared import FunctionDefinition
from pydantic import BaseModel, TypeAdapter
from typer.testing import CliRunner

from specdoctor.host import Host, LocalHost, MockHost
from specdoctor.testing import SSHServer
from specdoctor.toolkit import ToolContext, ToolRegistry, ToolResult, ToolSpec, registry
from specdoctor.toolkit.exports import langchain_tools, openai_arguments, openai_schema, openai_schemas

_ALL = registry.all()


def _names(specs: list[ToolSpec]) -> list[str]:
    return [s.name for s in specs]


@pytest.mark.parametrize("spec", _ALL, ids=_names(_ALL))
def test_openai_schema_is_valid_for_the_sdk(spec: ToolSpec) -> None:
    schema = openai_schema(spec)
    TypeAdapter(ChatCompletionToolParam).validate_python(schema)  # the SDK's request type
    fn = FunctionDefinition.model_validate(schema["function"])
    assert fn.name == spec.name and fn.description == spec.description[:1024]
    assert len(fn.name) <= 64 and fn.name.replace("_", "").isalnum()
    params = schema["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    assert params["type"] == "object"
    if schema["function"]["strict"]:
        _assert_strict(params)


def _assert_strict(node: Any) -> None:
    """OpenAI strict mode: every object closed and every property required."""
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is False
            assert set(node.get("required", [])) == set(node.get("properties", {}))
        for v in node.values():
            _assert_strict(v)
    elif isinstance(node, list):
        for v in node:
            _assert_strict(v)


# Tools whose arguments all have defaults (host_facts at least): their default call must fit the schema.
_DEFAULTABLE = [s for s in _ALL if not any(f.is_required() for f in s.input_model.model_fields.values())]


@pytest.mark.parametrize("spec", _DEFAULTABLE, ids=_names(_DEFAULTABLE))
def test_default_arguments_validate_against_the_exported_schema(spec: ToolSpec) -> None:
    """What a model may send (the schema) and what the tool accepts (the input model) agree: the defaults, with
    maps in their strict wire form (key/value entries), fit the schema and decode back to the same arguments."""
    params = openai_schema(spec)["function"]["parameters"]
    dumped = spec.input_model().model_dump(mode="json")
    wire = {k: ([{"key": mk, "value": mv} for mk, mv in v.items()]
                if isinstance(v, dict) and params["properties"][k].get("type") == "array" else v)
            for k, v in dumped.items()}
    jsonschema.validate(wire, params)
    assert openai_arguments(spec, wire) == dumped


class StrictIn(BaseModel):
    """All required, no defaults: strict-compatible."""

    repo: str
    port: int


class LooseIn(BaseModel):
    """A default: still strict (every property required in the schema)."""

    repo: str = "/srv/sglang"


class Out(BaseModel):
    """Output."""

    value: str


def test_strict_flag_follows_the_input_model() -> None:
    r = ToolRegistry()

    def strict_tool(ctx: ToolContext, args: StrictIn) -> Out:
        """Strict."""
        return Out(value=args.repo)

    def loose_tool(ctx: ToolContext, args: LooseIn) -> Out:
        """Loose."""
        return Out(value=args.repo)

    s, loose = r.register(strict_tool, effect="read"), r.register(loose_tool, effect="read")
    strict_schema, loose_schema = openai_schema(s), openai_schema(loose)
    assert strict_schema["function"]["strict"] is True
    assert strict_schema["function"]["parameters"]["additionalProperties"] is False
    # a default no longer costs strictness: the SDK's strict schema requires it (the model passes it)
    assert loose_schema["function"]["strict"] is True
    assert loose_schema["function"]["parameters"]["required"] == ["repo"]
    assert [x["function"]["name"] for x in openai_schemas(reg=r)] == ["loose_tool", "strict_tool"]
    assert [x["function"]["name"] for x in openai_schemas(["mutate"], reg=r)] == []


class _Client:
    """The smallest embedding client: a registry plus call(name, **kw) against one host."""

    def __init__(self, host: Host):
        self.registry = registry
        self.ctx = ToolContext(host=host)
        self.called: list[str] = []

    def call(self, name: str, **kwargs: Any) -> ToolResult:
        self.called.append(name)
        return self.registry.call(self.ctx, name, kwargs)


def test_langchain_tools_export_read_only_tools_that_run() -> None:
    client = _Client(LocalHost())
    tools = langchain_tools(client)
    assert all(isinstance(t, StructuredTool) for t in tools)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {s.name for s in registry.all(["read"])}
    facts = by_name["host_facts"]
    assert facts.args_schema is registry.get("host_facts").input_model
    out = json.loads(facts.invoke({"python": "python3"}))
    assert out["status"] == "ok" and out["tool"] == "host_facts"
    assert out["output"]["git_version"] and out["evidence"][0]["exit"] == 0
    assert client.called == ["host_facts"]
    everything = langchain_tools(client, effects=None)
    assert {t.name for t in everything} == {s.name for s in registry.all()}


def test_langchain_tool_rejects_bad_arguments_before_calling() -> None:
    client = _Client(MockHost(lambda *a: ""))
    facts = {t.name: t for t in langchain_tools(client)}["host_facts"]
    with pytest.raises(Exception, match="python"):
        facts.invoke({"python": ["not", "a", "string"]})
    assert client.called == []


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_host_facts_end_to_end(kind: str, sshd: SSHServer) -> None:
    import platform

    host: Host = LocalHost() if kind == "local" else sshd.connect()
    with host:
        res = registry.call(ToolContext(host=host), "host_facts", {"python": sshd.python})
    assert res.status == "ok", res.summary
    out = res.output or {}
    assert out["python_version"] == platform.python_version()
    assert out["os"].startswith("Linux") and out["cpus"] >= 1 and out["git_version"]
    assert out["nvidia_smi"] is False and "nvidia-smi not found on the host" in out["problems"]
    assert len(res.evidence) == 1 and res.evidence[0].env == {"PY": sshd.python}


def test_host_facts_parses_nvidia_smi() -> None:
    smi = "0, NVIDIA H200, 570.124.06, 143771, 00000000:18:00.0\n1, NVIDIA H200, 570.124.06, 143771, 00000000:2A:00.0\n"
    out = (f"@@os\nLinux 6.8 x86_64\n@@python\n3.11.7\n/usr/bin/python3\n@@git\ngit version 2.39.5\n"
           f"@@nproc\n64\n@@gpus\n{smi}")
    res = registry.call(ToolContext(host=MockHost(lambda *a: out)), "host_facts", {})
    o = res.output or {}
    assert [g["name"] for g in o["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert o["gpus"][1] == {"index": 1, "name": "NVIDIA H200", "driver": "570.124.06", "memory_mib": 143771,
                            "bus_id": "00000000:2A:00.0"}
    assert res.summary.startswith("Linux 6.8 x86_64; python 3.11.7; 2x NVIDIA H200")


def test_remote_script_is_uploaded_once_by_content_hash(sshd: SSHServer) -> None:
    from importlib import resources

    names = [p.name for p in resources.files("specdoctor.tools.remote").iterdir() if p.name.endswith(".py")
             and p.name != "__init__.py"]
    assert names, "no remote scripts shipped in specdoctor.tools.remote"
    with sshd.connect() as host:
        ctx = ToolContext(host=host, run_id="t")
        path = ctx.remote_script(names[0])
        assert path.startswith(f"{host.home()}/.specdoctor/remote/") and path.endswith(names[0])
        assert host.read(path) == resources.files("specdoctor.tools.remote").joinpath(names[0]).read_bytes()
        mark = host.audit.mark()
        assert ctx.remote_script(names[0]) == path and host.audit.since(mark) == []


def test_cli_tools_list_and_schema() -> None:
    from specdoctor.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["tools", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert {r["name"] for r in rows} == {s.name for s in registry.all()}
    assert {"name": "host_facts", "effect": "read",
            "description": registry.get("host_facts").summary_line} in rows
    schema = runner.invoke(app, ["tools", "schema", "--format", "openai", "--tool", "host_facts"])
    assert schema.exit_code == 0
    assert json.loads(schema.stdout) == [openai_schema(registry.get("host_facts"))]
