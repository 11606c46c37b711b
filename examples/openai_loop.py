"""An OpenAI tool-calling loop that investigates a GPU box with specdoctor's read-only tools.

    python examples/openai_loop.py --demo      # offline: a scripted model on loopback, no API key
    python examples/openai_loop.py --host sim:seed --model gpt-4.1        # OPENAI_API_KEY set
    python examples/openai_loop.py --host root@gpu-box --base-url http://127.0.0.1:8000/v1 --model local

The model sees every read-only tool (`specdoctor.tools.as_openai(client)`); each tool call it makes runs on
the host through the client (`client.openai_tool_message`) and goes back as a `tool` message.
"""

from __future__ import annotations

import os
from typing import Any

from openai import OpenAI

import specdoctor
from specdoctor.host import Host
from specdoctor.toolkit import ToolResult
from specdoctor.tools import as_openai

SYSTEM = ("You diagnose a speculative-decoding (EAGLE-3 on SGLang) slowdown on a GPU server. Use the tools "
          "to gather evidence (start with catalog_diffs on the repo), then answer with a short finding.")


def run(host: str | Host = "sim:seed", *, model: str = "gpt-4.1", base_url: str | None = None,
        question: str = "Why did speculative decoding get slower?", max_steps: int = 8) -> dict[str, Any]:
    """Drive the loop; return the final answer and the tools called (name, status, summary)."""
    llm = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "unused", max_retries=0)
    trail: list[dict[str, str]] = []
    with specdoctor.connect(host) as client:  # read-only: mutating tools are not offered nor run
        hints = client.hints
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{question} The SGLang checkout is at {hints.repo}; "
                                        f"the server was launched with: {hints.launch}"}]
        for _ in range(max_steps):
            msg = llm.chat.completions.create(model=model, messages=messages, tools=as_openai(client),
                                              temperature=0).choices[0].message
            if not msg.tool_calls:
                return {"answer": msg.content or "", "tools": trail}
            messages.append(msg.model_dump(exclude_none=True))
            for call in msg.tool_calls:
                reply = client.openai_tool_message(call)
                messages.append(reply)
                result = ToolResult.model_validate_json(reply["content"])
                trail.append({"tool": call.function.name, "status": result.status, "summary": result.summary})
    return {"answer": "(step budget spent)", "tools": trail}


if __name__ == "__main__":  # --demo: a scripted model on loopback, offline (specdoctor.testing.demo)
    import sys

    from specdoctor.testing.demo import example_main

    sys.exit(example_main(run, __doc__))
