"""specdoctor's LangChain tools inside a real LangGraph `ToolNode`, on the simulated seed host."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from specdoctor.embed import Client
from specdoctor.toolkit import registry
from specdoctor.tools import as_langchain

from .conftest import SEED_FILES


def run_tool_node(tools: list[StructuredTool], calls: list[dict]) -> list[ToolMessage]:
    """A one-node graph (START → ToolNode → END): ToolNode needs a graph runtime to run."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    out = graph.compile().invoke({"messages": [AIMessage(content="", tool_calls=calls)]})
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def test_tool_node_runs_catalog_diffs_on_the_seed(seed: Client) -> None:
    tools = as_langchain(seed)
    assert all(isinstance(t, StructuredTool) for t in tools)
    assert {t.name for t in tools} == {s.name for s in registry.all(["read"])}
    call = {"name": "catalog_diffs", "args": {"repo": seed.hints.repo}, "id": "call_1", "type": "tool_call"}
    [msg] = run_tool_node(tools, [call])
    assert msg.tool_call_id == "call_1" and msg.name == "catalog_diffs"
    result = json.loads(str(msg.content))
    assert result["status"] == "ok"
    assert len([f for f in result["output"]["files"] if not f.get("untracked")]) == SEED_FILES


def test_tool_node_reports_bad_arguments_and_unknown_tools_as_messages(seed: Client) -> None:
    calls = [{"name": "catalog_diffs", "args": {"repo": ["x"]}, "id": "c1", "type": "tool_call"},
             {"name": "stash_all", "args": {"repo": seed.hints.repo}, "id": "c2", "type": "tool_call"}]
    by_id = {m.tool_call_id: m for m in run_tool_node(as_langchain(seed), calls)}
    assert by_id["c1"].status == "error" and "repo" in str(by_id["c1"].content)
    # a read-only client does not even offer the mutating tool to the graph
    assert by_id["c2"].status == "error" and "stash_all is not a valid tool" in str(by_id["c2"].content)


def test_mutating_tools_on_a_read_only_client_come_back_needs_approval(seed: Client) -> None:
    every = {t.name: t for t in as_langchain(seed, effects=["read", "mutate", "disrupt"])}
    out = json.loads(every["stash_all"].invoke({"repo": seed.hints.repo}))
    assert out["status"] == "needs_approval" and out["evidence"] == []
