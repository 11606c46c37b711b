"""The examples' command line: `--demo` answers with a scripted model on loopback (offline, no key), and a model
endpoint that cannot be reached is one line, not a traceback."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any

from specdoctor.testing.openai_stub import OpenAIStub, Reply, ToolCall

__all__ = ["demo_script", "example_main"]


def _user_text(body: dict[str, Any]) -> str:
    items = body.get("messages") or body.get("input") or []
    return " ".join(str(m.get("content")) for m in items if isinstance(m, dict) and m.get("role") == "user")


def _tool_output(body: dict[str, Any]) -> dict[str, Any]:
    """The last tool result in the conversation (Chat Completions `tool` message or Responses `function_call_output`)."""
    for m in reversed(body.get("messages") or body.get("input") or []):
        if isinstance(m, dict) and (m.get("role") == "tool" or m.get("type") == "function_call_output"):
            return json.loads(m.get("content") or m.get("output") or "{}")
    return {}


def demo_script() -> list[Any]:
    """A model that calls catalog_diffs on the checkout named in the prompt, then says what the tool found."""

    def first(body: dict[str, Any]) -> Reply:
        found = re.search(r"checkout is at (/\S+?)[.;]?(\s|$)", _user_text(body))
        return Reply.calls(ToolCall(name="catalog_diffs", arguments={"repo": found.group(1) if found else "."}))

    def second(body: dict[str, Any]) -> Reply:
        result = _tool_output(body)
        return Reply(content=f"(demo model) catalog_diffs: {result.get('summary') or result.get('status')}")

    return [first, second]


def example_main(run: Callable[..., dict[str, Any]], doc: str | None, argv: list[str] | None = None) -> int:
    """Parse --host/--model/--base-url/--demo, run the example, print its trail and answer; 0, or 1 with one line."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--host", default="sim:seed")
    p.add_argument("--model", default="gpt-4.1")
    p.add_argument("--base-url", default=None)
    p.add_argument("--demo", action="store_true", help="a scripted model on loopback: offline, no API key")
    a = p.parse_args(argv)
    try:
        if a.demo:
            with OpenAIStub(demo_script()) as llm:
                out = run(a.host, model="demo", base_url=llm.base_url)
        else:
            out = run(a.host, model=a.model, base_url=a.base_url)
    except Exception as exc:  # the model endpoint or the host: one line that says which and why
        cause = exc.__cause__ or exc
        where = f" at {a.base_url}" if a.base_url else ""
        if type(exc).__name__ in ("APIConnectionError", "APITimeoutError"):
            print(f"example: cannot reach the model{where}: {cause} (start one, or run with --demo)", file=sys.stderr)
        else:
            print(f"example: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    for t in out["tools"]:
        print(f"  {t['tool']}: [{t['status']}] {t['summary']}")
    print(out["answer"])
    return 0
