"""Fake `python -m sglang.launch_server`: a main process serving SGLang's HTTP API plus per-rank workers."""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORKER = "import time\nwhile True:\n    time.sleep(1)\n"
FORCED = {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "8"}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=True)
    ap.add_argument("--model-path", "--model", default="fake/model")
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--speculative-algorithm", default=None)
    ap.add_argument("--speculative-draft-model-path", default=None)
    ap.add_argument("--speculative-num-steps", type=int, default=None)
    ap.add_argument("--speculative-eagle-topk", type=int, default=None)
    ap.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    ap.add_argument("--attention-backend", default="triton")
    ap.add_argument("--disable-cuda-graph", action="store_true")
    args, _ = ap.parse_known_args()
    if os.environ.get("FAKE_CRASH"):
        print("Traceback (most recent call last):\n  File x\nRuntimeError: fake start-up failure", flush=True)
        sys.exit(1)
    spec = bool(args.speculative_algorithm)
    ms_per_token = float(os.environ.get("FAKE_MS_PER_TOKEN", "1.0")) * (1.4 if spec else 1.0)
    drop = [n for n in os.environ.get("FAKE_DROP", "").split(",") if n]
    child_env = {k: v for k, v in os.environ.items() if k not in drop}
    for k, v in FORCED.items():
        if k != "NCCL_CUMEM_ENABLE" or k not in child_env:
            child_env[k] = v
    titles = [f"sglang::scheduler_TP{r}" if args.tp_size > 1 else "sglang::scheduler" for r in range(args.tp_size)]
    kids = [subprocess.Popen([t, "-c", WORKER], executable=sys.executable, env=child_env) for t in titles]
    kids.append(subprocess.Popen(["sglang::detokenizer", "-c", WORKER], executable=sys.executable, env=child_env))
    state = {"decodes": 0}
    lock = threading.Lock()
    info = {"version": "0.5.9-fake", "port": args.port, "tp_size": args.tp_size, "model_path": args.model_path,
            "attention_backend": args.attention_backend, "speculative_algorithm": args.speculative_algorithm,
            "speculative_num_steps": args.speculative_num_steps, "speculative_eagle_topk": args.speculative_eagle_topk,
            "speculative_num_draft_tokens": args.speculative_num_draft_tokens,
            "disable_cuda_graph": args.disable_cuda_graph, "cuda_graph_max_bs": 48}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            return None

        def _send(self, code, body):
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path in ("/health", "/health_generate"):
                return self._send(200, "")
            if self.path == "/get_server_info":
                st = {"last_gen_throughput": 1000.0 / ms_per_token}
                if spec:
                    st["avg_spec_accept_length"] = 2.0
                return self._send(200, {**info, "internal_states": [st]})
            if self.path == "/get_model_info":
                return self._send(200, repr({"model_path": args.model_path, "is_generation": True}))
            return self._send(404, "<html><title>404 Not Found</title></html>")

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            req = json.loads(self.rfile.read(n))
            tokens = int(req["sampling_params"]["max_new_tokens"])
            t0 = time.perf_counter()
            time.sleep(tokens * ms_per_token / 1000)
            meta = {"completion_tokens": tokens, "prompt_tokens": 8, "e2e_latency": time.perf_counter() - t0,
                    "finish_reason": {"type": "length", "length": tokens}}
            if spec:
                meta.update(spec_verify_ct=tokens // 2, spec_accept_length=2.0)
            with lock:
                state["decodes"] += 1
                line = (f"[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 1, #token: {tokens}, "
                        "token usage: 0.01, " + ("accept len: 2.00, accept rate: 0.50, " if spec else "")
                        + f"cuda graph: {not (spec or args.disable_cuda_graph)}, "
                        f"gen throughput (token/s): {1000 / ms_per_token:.2f}, #queue-req: 0")
                print(line, flush=True)
            return self._send(200, {"text": "x" * tokens, "meta_info": meta})

    srv = ThreadingHTTPServer((args.host, args.port), Handler)
    print("The server is fired up and ready to roll!", flush=True)
    if os.environ.get("FAKE_HANDLER_TRACEBACK"):  # what socketserver prints when a client hangs up mid-reply
        print("Exception occurred during processing of request from ('127.0.0.1', 43090)\n"
              "Traceback (most recent call last):\n  File \"socketserver.py\", line 691\n"
              "BrokenPipeError: [Errno 32] Broken pipe", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
