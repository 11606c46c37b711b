"""An OpenAI Responses-API tool loop that investigates a GPU box with specdoctor's read-only tools.

    python examples/openai_responses_loop.py --demo      # offline: a scripted model on loopback, no API key
    python examples/openai_responses_loop.py --host sim:seed --model gpt-4.1          # OPENAI_API_KEY set
    python examples/openai_responses_loop.py --host root@gpu-box --base-url http://127.0.0.1:8000/v1 --model m

The tools are offered in the Responses API's flat, strict form (`as_openai(client, api="responses")`); each
`function_call` item the model returns runs on the host through the client (`client.openai_tool_message`),
and its `function_call_output` goes back as input of the next turn.
"""

from __future__ import annotations

import json
import os
from typing import Any

from openai import OpenAI

import specdoctor
from specdoctor.embed.exports import as_openai
from specdoctor.host import Host

INSTRUCTIONS = ("You diagnose a speculative-decoding (EAGLE-3 on SGLang) slowdown on a GPU server. Use the tools "
                "to gather evidence (start with catalog_diffs on the repo), then answer with a short finding.")


def run(host: str | Host = "sim:seed", *, model: str = "gpt-4.1", base_url: str | None = None,
        question: str = "Why did speculative decoding get slower?", max_steps: int = 8) -> dict[str, Any]:
    """Drive the loop; return the final answer and the tools called (name, status, summary)."""
    llm = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY") or "unused", max_retries=0)
    trail: list[dict[str, str]] = []
    with specdoctor.connect(host) as client:  # read-only: mutating tools are not offered nor run
        hints = client.hints
        items: list[Any] = [{"role": "user", "content": f"{question} The SGLang checkout is at {hints.repo}; "
                                                        f"the server was launched with: {hints.launch}"}]
        tools = as_openai(client, api="responses")
        for _ in range(max_steps):
            resp = llm.responses.create(model=model, instructions=INSTRUCTIONS, input=items, tools=tools,
                                        temperature=0)
            calls = [item for item in resp.output if item.type == "function_call"]
            if not calls:
                return {"answer": resp.output_text, "tools": trail}
            items += [item.model_dump(exclude_none=True) for item in resp.output]  # the model's turn, as input
            for call in calls:
                answer = client.openai_tool_message(call)  # {"type": "function_call_output", ...}
                items.append(answer)
                result = json.loads(answer["output"])
                trail.append({"tool": call.name, "status": result["status"], "summary": result["summary"]})
    return {"answer": "(step budget spent)", "tools": trail}


if __name__ == "__main__":  # --demo: a scripted model on loopback, offline (specdoctor.testing.demo)
    import sys

    from specdoctor.testing.demo import example_main

    sys.exit(example_main(run, __doc__))
