"""A LangGraph ReAct agent whose tools are specdoctor's typed tools (`specdoctor.tools.as_langchain`).

    python examples/langgraph_agent.py --demo      # offline: a scripted model on loopback, no API key
    python examples/langgraph_agent.py --host sim:seed --model gpt-4.1      # OPENAI_API_KEY set
    python examples/langgraph_agent.py --host root@gpu-box --base-url http://127.0.0.1:8000/v1 --model local

`as_langchain(client)` gives LangChain StructuredTools (pydantic args schemas, ToolResult JSON as the tool
message), usable in `langgraph.prebuilt.ToolNode` (below: the classic agent ⇄ tools graph) or any prebuilt
agent (`langchain.agents.create_agent`, the deprecated `langgraph.prebuilt.create_react_agent`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import specdoctor
from specdoctor.host import Host
from specdoctor.tools import as_langchain

PROMPT = ("You diagnose a speculative-decoding (EAGLE-3 on SGLang) slowdown on a GPU server. Use the tools "
          "to gather evidence (start with catalog_diffs on the repo), then answer with a short finding.")


def build_agent(llm: ChatOpenAI, tools: list[Any]) -> Any:
    """agent → (tool calls?) → ToolNode → agent ... until the model answers without tool calls."""
    bound = llm.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke([SystemMessage(PROMPT), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def run(host: str | Host = "sim:seed", *, model: str = "gpt-4.1", base_url: str | None = None,
        question: str = "Why did speculative decoding get slower?") -> dict[str, Any]:
    """Run the agent to its answer; return the answer and the tools called (name, status, summary)."""
    llm = ChatOpenAI(model=model, base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "unused",
                     temperature=0, max_retries=0)
    with specdoctor.connect(host) as client:  # read-only; pass allow_mutations=True for the rest
        agent = build_agent(llm, as_langchain(client))
        state = agent.invoke({"messages": [("user", f"{question} The SGLang checkout is at {client.hints.repo}.")]},
                             {"recursion_limit": 20})
    trail = []
    for m in state["messages"]:
        if isinstance(m, ToolMessage):
            result = json.loads(str(m.content))
            trail.append({"tool": m.name or "", "status": result["status"], "summary": result["summary"]})
    last = state["messages"][-1]
    return {"answer": str(last.content) if isinstance(last, AIMessage) else "", "tools": trail}


if __name__ == "__main__":  # --demo: a scripted model on loopback, offline (specdoctor.testing.demo)
    import sys

    from specdoctor.testing.demo import example_main

    sys.exit(example_main(run, __doc__))
