"""SGLang's HTTP API on loopback: health, info, /generate (JSON and SSE), OpenAI routes, /metrics."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

from . import profiler
from .config import log
from .versions import measured_0517

__all__ = ["TwinHandler", "make_handler", "run_generate"]


def _prompt_tokens(req: dict) -> int:
    if req.get("input_ids") is not None:
        ids = req["input_ids"]
        return len(ids[0]) if ids and isinstance(ids[0], list) else len(ids)
    text = req.get("text") or ""
    if isinstance(text, list):
        text = text[0] if text else ""
    return max(1, int(len(str(text).split()) * 1.3) + 1)


def run_generate(state: dict, req: dict, emit) -> dict:
    """Simulate one request; `emit(obj)` gets cumulative stream chunks (None: non-stream). Returns the final body."""
    engine = state["engine"]
    sp = req.get("sampling_params") or {}
    if isinstance(sp, list):
        sp = sp[0] if sp else {}
    max_new = int(sp.get("max_new_tokens", 128))
    temperature = float(sp.get("temperature", 1.0))  # SamplingParams' default (sampling_params.py)
    text_in = req.get("text") or ""
    if isinstance(text_in, list):
        text_in = text_in[0] if text_in else ""
    plan = engine.plan(_prompt_tokens(req), max_new, str(text_in), temperature)
    scale = engine.time_scale
    text, ids = engine.words(max_new)
    engine.begin(plan)
    start = time.perf_counter()
    model_ms = plan.ttft_ms
    produced = 1 if max_new > 0 else 0

    def wait_until(ms: float) -> None:
        delay = ms / scale / 1000.0 - (time.perf_counter() - start)
        if delay > 0.002:
            time.sleep(delay)

    def chunk(n: int, finished: bool) -> dict:
        out = {"output_ids": ids[:n], "meta_info": engine.meta_info(plan, n, finished)}
        return out if state["args"].get("skip_tokenizer_init") else {"text": text[: _cut(text, n)], **out}

    try:
        wait_until(model_ms)
        if emit is not None and produced:
            emit(chunk(produced, False))
        for i, (ms, new, correct) in enumerate(plan.steps):
            prof = state.get("profiler")
            if prof is not None:  # a profiled step pays the profiler's overhead, which e2e_latency sees
                ms = prof.on_step(state, ms)
                plan.steps[i] = (ms, new, correct)
            model_ms += ms
            produced += new
            engine.step(ms, new, correct)
            if emit is not None:
                wait_until(model_ms)
                emit(chunk(produced, False) if produced < max_new else chunk(produced, True))
        wait_until(model_ms)
    finally:
        engine.end(plan, produced)
    final = chunk(produced, True)
    if emit is not None and not plan.steps:
        emit(final)
    return final


def _cut(text: str, n: int) -> int:
    idx = 0
    for _ in range(n):
        nxt = text.find(" ", idx + 1)
        if nxt < 0:
            return len(text)
        idx = nxt
    return idx


def _server_info(state: dict) -> dict:
    engine, args, version = state["engine"], state["args"], state["version"]
    internal = dict(args)
    internal.update({"last_gen_throughput": engine.last_gen_throughput,
                     "effective_max_running_requests_per_dp": args.get("max_running_requests") or 512,
                     "memory_usage": {"weight": 60.4, "kvcache": 24.1, "token_capacity": engine.max_total_tokens,
                                      "graph": {"decode": 1.21} if not engine.perf["speculative"]
                                      else {"target_verify": 1.21, "draft_decode": 0.2, "draft_extend": 0.1}}})
    if engine.avg_spec_accept_length is not None:
        internal["avg_spec_accept_length"] = engine.avg_spec_accept_length
    body = dict(args)
    # 0.5.9: {**asdict(server_args), **scheduler_info (status, max_total_num_tokens, max_req_input_len),
    # internal_states, version}; 0.5.23 adds startup_time, launch_command, frontend (entrypoints/http_server.py).
    body.update({"status": "ready", "max_total_num_tokens": engine.max_total_tokens,
                 "max_req_input_len": engine.max_total_tokens - 1,
                 "internal_states": [internal], "version": version})
    if measured_0517(version):
        graph = {k: 0.0 for k in ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")}
        graph.update({"prefill": 0.9, **({"target_verify": 0.07, "draft_prefill": 0.78, "draft_decode": 0.06,
                                          "draft_extend": 0.06} if engine.perf["speculative"] else {"decode": 0.04})})
        internal["memory_usage"].update({"startup_available": 88.6, "token_capacity_swa": None, "graph": graph})
        for key in ("hidden_size", "cuda_graph_bs"):  # the twin's own; not ServerArgs fields of 0.5.17
            body.pop(key, None)
            internal.pop(key, None)
    elif not version.startswith("0.5.9"):
        body["startup_time"] = state["started"]
        body["launch_command"] = " ".join(state["argv"])
        body["frontend"] = "python"
    return body


def _model_info(state: dict) -> dict:
    args, hf = state["args"], state["hf"]
    info = {"model_path": args["model_path"], "tokenizer_path": args["tokenizer_path"], "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": True,
            "has_audio_understanding": False, "model_type": hf.get("model_type"),
            "architectures": hf.get("architectures")}
    if measured_0517(state["version"]):  # the real 0.5.17 body (fixtures): an embedding block, no 0.5.23 names
        info["has_image_understanding"] = False
        info["embedding"] = {"family": "none", "task": "none", "execution": "none", "attention": "none",
                             "pooling": "model_defined", "normalize": False, "postprocessor": "none",
                             "tokenizer_special_tokens": "model_default", "supports_dimensions": False,
                             "supports_token_embeddings": False, "supports_multimodal": False,
                             "requires_embedding_flag": False, "auto_enable_embedding": False,
                             "bcg_eligibility": "disabled", "safe_disable_kv_cache": False,
                             "safe_disable_radix_cache": False, "safe_disable_chunked_prefill": False,
                             "enabled": False, "matryoshka_dimensions": [],
                             "bcg": {"prefill_backend": "breakable", "enabled": True, "capture_token_budget": 8192,
                                     "capture_batch_sizes": []},
                             "cache": {"kv_cache_disabled": False, "radix_cache_disabled": False,
                                       "chunked_prefill_disabled": False}}
    elif not state["version"].startswith("0.5.9"):
        info.update({"served_model_name": args["served_model_name"], "load_format": args.get("load_format"),
                     "reasoning_parser": args.get("reasoning_parser"), "tool_call_parser": args.get("tool_call_parser"),
                     "disaggregation_mode": "null"})
    return info


def _metrics(state: dict) -> str:
    e = state["engine"]
    labels = f'engine_type="unified",model_name="{state["args"]["served_model_name"]}",tp_rank="0"'
    rows = [("gauge", "num_running_reqs", "The number of running requests.", e.running),
            ("gauge", "num_queue_reqs", "The number of requests in the waiting queue.", 0),
            ("gauge", "token_usage", "The token usage.", round(e.running_tokens / e.max_total_tokens, 4)),
            ("gauge", "gen_throughput", "The generation throughput (token/s).", e.last_gen_throughput),
            ("gauge", "cache_hit_rate", "The prefix cache hit rate.", 0.0),
            ("gauge", "max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", e.max_total_tokens),
            ("counter", "prompt_tokens_total", "Number of prefill tokens processed.", e.prompt_tokens_total),
            ("counter", "generation_tokens_total", "Number of generation tokens processed.", e.generation_tokens_total),
            ("counter", "num_requests_total", "Number of requests processed.", e.requests_total)]
    if e.perf["speculative"]:
        rows.append(("gauge", "spec_accept_length", "Mean acceptance length of speculative decoding.",
                     e.last_accept_length or 0.0))
        rows.append(("gauge", "spec_accept_rate", "Speculative acceptance rate.", e.last_accept_rate or 0.0))
    out = []
    for kind, name, help_, value in rows:
        out += [f"# HELP sglang:{name} {help_}", f"# TYPE sglang:{name} {kind}", f"sglang:{name}{{{labels}}} {float(value)}"]
    out += ["# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds",
            "# TYPE sglang:e2e_request_latency_seconds histogram",
            f"sglang:e2e_request_latency_seconds_sum{{{labels}}} {e.e2e_sum}",
            f"sglang:e2e_request_latency_seconds_count{{{labels}}} {float(e.requests_total)}"]
    return "\n".join(out) + "\n"


class TwinHandler(BaseHTTPRequestHandler):
    """What every engine's stand-in handler shares: uvicorn's headers, JSON bodies, the state on the server object
    (`server.twin_state`); each engine writes its own access line (`_access`)."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - uvicorn-style access lines instead
        return

    def _access(self, code: int) -> None:
        phrase = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}.get(code, "")
        log(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.command} {self.path} '
            f'HTTP/1.1" {code} {phrase}')

    def _send(self, code: int, body, ctype: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        if ctype:
            self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self._access(code)

    def _state(self) -> dict:
        return self.server.twin_state  # type: ignore[attr-defined]

    def _body(self) -> dict | None:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        try:
            obj = json.loads(raw or b"{}")
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None


def make_handler():
    """The request handler class; state lives on the server object (`server.twin_state`)."""

    class Handler(TwinHandler):
        def do_GET(self):  # noqa: N802
            st = self._state()
            path = self.path.split("?", 1)[0]
            new = not st["version"].startswith("0.5.9")
            m0517 = measured_0517(st["version"])
            if path in ("/health", "/health_generate"):
                return self._send(200 if st["ready"] else 503, "" if st["ready"] or m0517 else "starting",
                                  "" if m0517 else "text/plain")
            if m0517 and path == "/ping":
                return self._send(200, "", "")
            if m0517 and path in ("/get_load", "/v1/loads"):
                if path == "/get_load":
                    log("Endpoint '/get_load' is deprecated and will be removed in a future version. "
                        "Please use '/v1/loads' instead.")
                e = st["engine"]
                return self._send(200, [{"dp_rank": 0, "num_reqs": e.running, "num_waiting_reqs": 0,
                                         "num_tokens": e.running_tokens, "num_pending_tokens": 0,
                                         "ts_tic": time.monotonic()}])
            if m0517 and path in ("/get_weight_version", "/weight_version"):
                return self._send(404, {"object": "error", "message": "Endpoint '/get_weight_version' or "
                                        "'/weight_version' is deprecated. Please use '/model_info' instead.",
                                        "type": "404", "param": None, "code": 404})
            if path == "/ready" and new:
                return self._send(200 if st["ready"] else 503, {"status": "ready" if st["ready"] else "starting"})
            if path in ("/server_info", "/get_server_info"):
                # Both versions serve both and warn on the old one (entrypoints/http_server.py, 0.5.9 and 0.5.23).
                if path == "/get_server_info":
                    log("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                        "Please use '/server_info' instead.")
                return self._send(200, _server_info(st))
            if path in ("/model_info", "/get_model_info"):
                if path == "/get_model_info":
                    log("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                        "Please use '/model_info' instead.")
                return self._send(200, _model_info(st))
            if path in ("/get_weight_version", "/weight_version") and not new:
                return self._send(404, {"detail": "Endpoint '/get_weight_version' or '/weight_version' is "
                                                  "deprecated. Please use '/model_info' instead."})
            if path == "/v1/models":
                a = st["args"]
                return self._send(200, {"object": "list", "data": [
                    {"id": a["served_model_name"], "object": "model", "created": int(st["started"]),
                     "owned_by": "sglang", "root": a["model_path"],
                     **({"parent": None} if measured_0517(st["version"]) else {}),
                     "max_model_len": a.get("context_length") or 262144}]})
            if path == "/metrics" and st["args"].get("enable_metrics"):
                return self._send(200, _metrics(st), "text/plain; version=0.0.4; charset=utf-8")
            if path == "/flush_cache":
                return self._send(200, "Cache flushed.\nPlease check backend logs for more details.", "text/plain")
            return self._send(404, {"detail": "Not Found"})

        def do_POST(self):  # noqa: N802
            st = self._state()
            path = self.path.split("?", 1)[0]
            req = self._body()
            if req is None:
                return self._send(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
            if not st["ready"] and path in ("/generate", "/v1/completions", "/v1/chat/completions"):
                return self._send(503, {"error": {"message": "server is starting"}})
            if path == "/generate":
                return self._generate(st, req)
            if path in ("/v1/completions", "/v1/chat/completions"):
                return self._openai(st, req, chat=path.endswith("chat/completions"))
            if path == "/flush_cache":
                return self._send(200, "Cache flushed.", "text/plain")
            if path in ("/start_profile", "/stop_profile"):
                code, text = profiler.start_profile(st, req) if path == "/start_profile" else profiler.stop_profile(st)
                return self._send(code, text, "text/plain")
            return self._send(404, {"detail": "Not Found"})

        def _generate(self, st: dict, req: dict) -> None:
            if not req.get("stream"):
                texts = req.get("text")
                if isinstance(texts, list):
                    out = [run_generate(st, {**req, "text": t}, None) for t in texts]
                    return self._send(200, out)
                return self._send(200, run_generate(st, req, None))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

            def write(data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            run_generate(st, req, lambda obj: write(b"data: " + json.dumps(obj).encode() + b"\n\n"))
            write(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self._access(200)

        def _openai(self, st: dict, req: dict, chat: bool) -> None:
            max_new = int(req.get("max_tokens") or req.get("max_completion_tokens") or 128)
            prompt = " ".join(m.get("content", "") for m in req.get("messages", []) if isinstance(m.get("content"), str)) \
                if chat else str(req.get("prompt", ""))
            sp = {"max_new_tokens": max_new, "temperature": float(req.get("temperature", 1.0))}
            res = run_generate(st, {"text": prompt, "sampling_params": sp}, None)
            mi = res["meta_info"]
            usage = {"prompt_tokens": mi["prompt_tokens"], "completion_tokens": mi["completion_tokens"],
                     "total_tokens": mi["prompt_tokens"] + mi["completion_tokens"]}
            choice = {"index": 0, "finish_reason": "length"}
            if chat:
                choice["message"] = {"role": "assistant", "content": res["text"]}
            else:
                choice["text"] = res["text"]
            self._send(200, {"id": mi["id"], "object": "chat.completion" if chat else "text_completion",
                             "created": int(time.time()), "model": st["args"]["served_model_name"],
                             "choices": [choice], "usage": usage})

    return Handler
