"""A scripted OpenAI-compatible chat.completions server on 127.0.0.1, for tests of LLM-driven code.

Usage (tests, and the examples' `--demo`):

    from specdoctor.testing.openai_stub import OpenAIStub, Reply, ToolCall

    with OpenAIStub([Reply.calls(ToolCall(name="catalog_diffs", arguments={"repo": "/srv/sglang"})),
                     lambda body: Reply(content="done: " + body["messages"][-1]["content"][:40])]) as llm:
        client = OpenAI(base_url=llm.base_url, api_key="stub")   # also ChatOpenAI(base_url=..., api_key=...)
        ...
        assert llm.requests[0]["tools"]        # every request body the stub received, parsed

Each POST /v1/chat/completions consumes the next script entry: a `Reply`, or a callable taking the request
body (a dict) and returning a `Reply` (so an answer can depend on the tool results in the conversation).
Replies become real `chat.completion` objects (tool calls get ids `call_<n>`); `response_format` requests
just get the reply's `content` (put the JSON there). Streaming is refused (400). When the script is used up
the stub answers 400 with an explanatory error, so a runaway loop fails fast instead of hanging; a script
callable that raises (a failed `assert` on the request) also gets a 400, and its message lands in `errors`.
POST /v1/responses consumes the same script and answers as a Responses-API `response` (function_call
items and an output_text message). GET /v1/models lists `model`. Run it by hand with `python -m specdoctor.testing.openai_stub script.json` (a JSON
list of Reply objects) to try the examples from a terminal.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["OpenAIStub", "Reply", "ScriptEntry", "ToolCall"]


class ToolCall(BaseModel):
    """One function call the scripted model makes."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Reply(BaseModel):
    """One scripted assistant message: text, tool calls, or both."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    refusal: str | None = None

    @classmethod
    def calls(cls, *calls: ToolCall) -> Reply:
        return cls(tool_calls=list(calls))


ScriptEntry = Reply | Callable[[dict[str, Any]], Reply]


class OpenAIStub:
    """The server; a context manager (start/stop). `base_url` ends in /v1 as the OpenAI SDK expects."""

    def __init__(self, script: list[ScriptEntry], model: str = "stub-model"):
        self.script = list(script)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._calls = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="openai-stub", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def remaining(self) -> int:
        return len(self.script)

    def start(self) -> OpenAIStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering ------------------------------------------------------------------------------
    def _completion(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            if body.get("stream"):
                return 400, _error("the stub does not stream; call without stream=True")
            if not self.script:
                return 400, _error(f"script exhausted after {len(self.requests) - 1} replies")
            entry = self.script.pop(0)
        try:
            reply = entry(body) if callable(entry) else entry
        except Exception as exc:  # a failed expectation in a script entry: the test sees it in `errors`
            with self._lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            return 400, _error(f"script entry {len(self.requests)} raised {type(exc).__name__}: {exc}")
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": reply.refusal}
        if reply.tool_calls:
            calls = []
            for c in reply.tool_calls:
                with self._lock:
                    self._calls += 1
                    n = self._calls
                calls.append({"id": f"call_{n}", "type": "function",
                              "function": {"name": c.name, "arguments": json.dumps(c.arguments)}})
            message["tool_calls"] = calls
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        return 200, {
            "id": f"chatcmpl-stub-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _response(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST /v1/responses: the same script, answered as a Responses-API `response` object."""
        code, completion = self._completion(body)
        if code != 200:
            return code, completion
        message = completion["choices"][0]["message"]
        output: list[dict[str, Any]] = []
        for call in message.get("tool_calls") or []:
            output.append({"type": "function_call", "id": "fc_" + call["id"], "call_id": call["id"],
                           "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                           "status": "completed"})
        if message.get("content") is not None:
            output.append({"type": "message", "id": f"msg_{len(self.requests)}", "role": "assistant",
                           "status": "completed",
                           "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
        return 200, {"id": f"resp_stub_{len(self.requests)}", "object": "response", "created_at": int(time.time()),
                     "model": completion["model"], "status": "completed", "output": output,
                     "parallel_tool_calls": True, "tool_choice": "auto", "tools": body.get("tools") or []}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet: tests must not print
                return

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": stub.model, "object": "model", "created": 0, "owned_by": "stub"}]})
                else:
                    self._send(404, _error(f"no route GET {self.path}"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError as exc:
                    self._send(400, _error(f"body is not JSON: {exc}"))
                    return
                if self.path.rstrip("/").endswith("/responses"):
                    code, payload = stub._response(body)
                    self._send(code, payload)
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, _error(f"no route POST {self.path}"))
                    return
                code, payload = stub._completion(body)
                self._send(code, payload)

        return Handler


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "stub"}}


if __name__ == "__main__":  # manual use: serve a JSON script until Ctrl-C
    replies = [Reply.model_validate(r) for r in json.loads(open(sys.argv[1]).read())] if len(sys.argv) > 1 else []
    with OpenAIStub(list(replies)) as srv:
        sys.stderr.write(f"OpenAI stub on {srv.base_url} ({len(replies)} scripted replies)\n")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
