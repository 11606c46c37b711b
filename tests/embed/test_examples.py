"""The examples run end to end against `sim:seed`, their LLM parts against the local OpenAI stub.

examples/mcp_config.json is exercised by test_mcp_wire.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
from types import ModuleType
from typing import Any

from specdoctor.embed import Client

from .conftest import REPO_ROOT, SEED_FILES
from .openai_stub import OpenAIStub, Reply, ToolCall


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", REPO_ROOT / "examples" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _script() -> list[Any]:
    """A model that reads the repo path from the prompt, calls catalog_diffs, then reports the file count."""

    def first(body: dict[str, Any]) -> Reply:
        offered = {t["function"]["name"] for t in body["tools"]}
        assert "catalog_diffs" in offered and "stash_all" not in offered
        prompt = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
        found = re.search(r"checkout is at (/\S+?)[.;]?(\s|$)", prompt)
        assert found, prompt
        return Reply.calls(ToolCall(name="catalog_diffs", arguments={"repo": found.group(1)}))

    def second(body: dict[str, Any]) -> Reply:
        tool_msg = body["messages"][-1]
        assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1"
        result = json.loads(tool_msg["content"])
        files = [f for f in result["output"]["files"] if not f.get("untracked")]
        return Reply(content=f"{len(files)} locally modified files; start with the triage.")

    return [first, second]


def _check(out: dict[str, Any], llm: OpenAIStub) -> None:
    assert llm.errors == []
    assert out["answer"] == f"{SEED_FILES} locally modified files; start with the triage."
    assert [(t["tool"], t["status"]) for t in out["tools"]] == [("catalog_diffs", "ok")]
    assert len(llm.requests) == 2 and llm.remaining == 0


def test_openai_loop_example(seed: Client) -> None:
    with OpenAIStub(_script()) as llm:  # the session's sim:seed host, shared (building one takes seconds)
        out = _example("openai_loop").run(seed.host, model="stub-model", base_url=llm.base_url)
    _check(out, llm)
    assert llm.requests[0]["model"] == "stub-model" and llm.requests[0]["temperature"] == 0


def test_langgraph_agent_example(seed: Client) -> None:
    with OpenAIStub(_script()) as llm:
        out = _example("langgraph_agent").run(seed.host, model="stub-model", base_url=llm.base_url)
    _check(out, llm)
