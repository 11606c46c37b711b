"""Answer one OpenAI tool call (Chat Completions or Responses API, SDK object or its dict form) with a Client."""

from __future__ import annotations

from typing import Any

__all__ = ["answer_tool_call", "tool_call_parts"]


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def tool_call_parts(tool_call: Any) -> tuple[str, str, Any, bool]:
    """(call id, tool name, arguments JSON, is a Responses-API item) of any tool-call shape the SDK gives."""
    fn = _get(tool_call, "function")
    if fn is not None:  # chat.completions: {"id", "type": "function", "function": {"name", "arguments"}}
        return str(_get(tool_call, "id") or ""), str(_get(fn, "name") or ""), _get(fn, "arguments"), False
    if _get(tool_call, "type") == "function_call":  # responses: {"type": "function_call", "call_id", "name", ...}
        return (str(_get(tool_call, "call_id") or ""), str(_get(tool_call, "name") or ""),
                _get(tool_call, "arguments"), True)
    raise TypeError(f"not an OpenAI function tool call: {type(tool_call).__name__}")


def answer_tool_call(client: Any, tool_call: Any) -> dict[str, Any]:
    """Run the call through `client` (strict-encoded maps decoded first) and return the answering message:
    `{"role": "tool", ...}` for Chat Completions, `{"type": "function_call_output", ...}` for Responses."""
    import json

    from specdoctor.toolkit.exports import openai_arguments

    call_id, name, arguments, responses = tool_call_parts(tool_call)
    if name in {s.name for s in client.registry.all()}:
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else arguments
        except json.JSONDecodeError:
            parsed = arguments  # call_json reports the broken JSON to the model
        if isinstance(parsed, dict):
            arguments = openai_arguments(client.registry.get(name), parsed)
    content = client.call_json(name, arguments)
    if responses:
        return {"type": "function_call_output", "call_id": call_id, "output": content}
    return {"role": "tool", "tool_call_id": call_id, "content": content}
