"""vLLM 0.26's HTTP routes on loopback: /health, /version, /v1/models, /v1/completions, /metrics, profiler."""

from __future__ import annotations

import time
import uuid

from vllm._twin.http import TwinHandler, run_generate

from .profiler import start_profile, stop_profile
from .stats import vlog

__all__ = ["make_handler"]


def _completion(state: dict, req: dict) -> tuple[int, dict]:
    """POST /v1/completions (completion/protocol.py:45-80): greedy unless asked, `ignore_eos` honoured."""
    prompt = req.get("prompt")
    if isinstance(prompt, list):
        prompt = prompt[0] if prompt else ""
    if not isinstance(prompt, str):
        return 400, {"error": {"message": "prompt must be a string", "type": "BadRequestError", "code": 400}}
    model = state["args"]["served_model_name"]
    if req.get("model") not in (None, model):
        return 404, {"error": {"message": f"The model `{req.get('model')}` does not exist.",
                               "type": "NotFoundError", "code": 404}}
    max_tokens = int(req.get("max_tokens") or 16)
    temperature = float(req.get("temperature", 1.0))
    out = run_generate(state, {"text": prompt, "sampling_params": {"max_new_tokens": max_tokens,
                                                                   "temperature": temperature}}, None)
    meta = out.get("meta_info") or {}
    n = int(meta.get("completion_tokens") or 0)
    body = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "text": out.get("text", ""), "logprobs": None,
                                         "finish_reason": "length", "stop_reason": None}],
            "usage": {"prompt_tokens": int(meta.get("prompt_tokens") or 0), "total_tokens":
                      int(meta.get("prompt_tokens") or 0) + n, "completion_tokens": n, "prompt_tokens_details": None}}
    return 200, body


def make_handler():
    """The request handler class; state lives on the server object (`server.twin_state`)."""

    class Handler(TwinHandler):
        def _access(self, code: int) -> None:  # uvicorn's access line through vLLM's logger
            vlog(f'{self.client_address[0]}:{self.client_address[1]} - "{self.command} {self.path} HTTP/1.1" {code}',
                 where="h11_impl.py:477")

        def do_GET(self):  # noqa: N802
            st = self._state()
            path = self.path.split("?", 1)[0]
            if path == "/health":
                return self._send(200 if st["ready"] else 503, "", "application/json")
            if path == "/version":  # serve/instrumentator/basic.py:53
                return self._send(200, {"version": st["version"]})
            if path == "/v1/models":
                a = st["args"]
                return self._send(200, {"object": "list", "data": [{
                    "id": a["served_model_name"], "object": "model", "created": int(st["started"]),
                    "owned_by": "vllm", "root": a["model_path"], "parent": None,
                    "max_model_len": int(a.get("max_model_len") or 131072)}]})
            if path == "/metrics":
                return self._send(200, st["engine"].metrics(st["args"]["served_model_name"]),
                                  "text/plain; version=0.0.4; charset=utf-8")
            if path == "/load":
                return self._send(200, {"server_load": st["engine"].running})
            return self._send(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            st = self._state()
            path = self.path.split("?", 1)[0]
            if path in ("/start_profile", "/stop_profile"):
                # serve/profile/api_router.py: only mounted when --profiler-config names a profiler
                prof = st["args"].get("profiler_config") or {}
                if not (isinstance(prof, dict) and prof.get("profiler")):
                    return self._send(404, {"detail": "Not Found"})
                code, text = start_profile(st) if path == "/start_profile" else stop_profile(st)
                return self._send(code, text)
            if path != "/v1/completions":
                return self._send(404, {"detail": "Not Found"})
            if not st["ready"]:
                return self._send(503, {"error": {"message": "starting", "code": 503}})
            req = self._body()
            if req is None:
                return self._send(400, {"error": {"message": "invalid JSON", "type": "BadRequestError", "code": 400}})
            code, body = _completion(st, req)
            return self._send(code, body)

    return Handler
