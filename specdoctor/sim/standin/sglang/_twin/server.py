"""The stand-in server's parent process: parse flags, force SGLang's env, spawn workers, serve HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer

from .args import parse_server_args, resolve
from .config import bump_counter, load_twin, log, sandbox_root
from .engine import Engine
from .gpumem import launch_seconds, memory_config
from .http import make_handler
from .startup0517 import log_startup_0517
from .versions import measured_0517
from .workers import proc_starttime, spawn_children, start_resource_tracker

__all__ = ["main"]


def _force_env(args: dict, version: str) -> None:
    """What SGLang's _set_envs_and_config does to os.environ before it spawns (reference/sglang.md §6)."""
    env = os.environ
    if "NCCL_CUMEM_ENABLE" not in env or args.get("enable_symm_mem"):
        env["NCCL_CUMEM_ENABLE"] = str(int(bool(args.get("enable_symm_mem"))))
    if "NCCL_NVLS_ENABLE" not in env or args.get("enable_nccl_nvls") or args.get("enable_symm_mem"):
        env["NCCL_NVLS_ENABLE"] = str(int(bool(args.get("enable_nccl_nvls") or args.get("enable_symm_mem"))))
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    if version.startswith("0.5.9") or measured_0517(version):
        env["CUDA_MODULE_LOADING"] = "AUTO"
    if measured_0517(version):  # what the real 0.5.17 children carry besides (procs.json)
        env.update({"SGLANG_USE_CUDA_IPC_TRANSPORT": "1", "SGLANG_ENABLE_TORCH_COMPILE": "0",
                    "SGLANG_DISABLE_OUTLINES_DISK_CACHE": "0", "SGLANG_ENABLE_DETERMINISTIC_INFERENCE": "0",
                    "SGLANG_OPT_FP8_WO_A_GEMM": "False", "SGLANG_RUN_ID": f"sglang-run-{time.time()}-{os.getpid()}"})
        for name, value in (("CUTE_DSL_LOG_TO_CONSOLE", "0"), ("DG_JIT_CACHE_DIR", os.path.join(
                sandbox_root(), "home", ".cache", "deep_gemm")), ("DG_JIT_USE_NVRTC", "0"), ("TLLM_LOG_LEVEL", "error")):
            env.setdefault(name, value)
    if not version.startswith("0.5.9"):
        if env.get("TRTLLM_ENABLE_PDL") != "0":
            env["TRTLLM_ENABLE_PDL"] = "1"
        env.setdefault("CUTE_DSL_LOG_LEVEL", "30")
    if args.get("enable_metrics"):
        env.setdefault("PROMETHEUS_MULTIPROC_DIR", os.path.join(sandbox_root(), "run", f"prometheus-{os.getpid()}"))


def _traceback(error: str, file: str | None, tag: str, version: str, tree: str | None = None,
               line: int = 1) -> None:
    """SGLang's 'Scheduler hit an exception' block; frames point at the real modules of the imported tree."""
    log("Scheduler hit an exception: Traceback (most recent call last):", tag)
    if file is None:
        sys.stderr.write(f"{error}\n\n")
        log("Received sigquit from a child process. It usually means the child failed.")
        return
    pkg = os.path.join(tree, "python", "sglang") if tree else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # Real call sites. 0.5.9: managers/scheduler.py:3130 (run_scheduler_process) builds the Scheduler, and
    # model_executor/model_runner.py:1906 (_dummy_run) calls the target's EAGLE-3 hook. 0.5.23:
    # managers/scheduler.py:6362, model_runner_components/attention_backend_setup.py:61.
    if version.startswith("0.5.9"):
        frames = [("srt/managers/scheduler.py", 3130, "run_scheduler_process", "scheduler = Scheduler("),
                  ("srt/model_executor/model_runner.py", 1906, "_dummy_run",
                   "self.model.set_eagle3_layers_to_capture()")]
    else:
        frames = [("srt/managers/scheduler.py", 6362, "run_scheduler_process",
                   "scheduler = Scheduler(server_args, port_args)"),
                  ("srt/model_executor/model_runner_components/attention_backend_setup.py", 61,
                   "configure_aux_hidden_state_capture",
                   "model.set_eagle3_layers_to_capture(eagle_aux_hidden_state_layer_ids)")]
    sys.stderr.write(
        "".join(f'  File "{pkg}/{rel}", line {no}, in {fn}\n    {code}\n' for rel, no, fn, code in frames) +
        f'  File "{file}", line {line}, in <module>\n'
        f"{error}\n\n")
    log("Received sigquit from a child process. It usually means the child failed.")


def main(argv: list[str], prog: str, entry: str) -> int:
    """Entry point of `python -m sglang.launch_server` and `sglang serve`."""
    twin = load_twin()
    version = twin["version"]
    ns = parse_server_args(argv, version, prog)
    root = sandbox_root()
    if entry == "launch_server" and not version.startswith("0.5.9"):
        log("'python -m sglang.launch_server' is still supported, but 'sglang serve' is the recommended entrypoint.")
    config_path = os.path.join(ns.model_path, "config.json")
    if not os.path.isfile(config_path):
        log(f"OSError: {ns.model_path} does not appear to have a file named config.json.")
        return 1
    with open(config_path, encoding="utf-8") as fh:
        hf = json.load(fh)
    arch = (hf.get("architectures") or ["LlamaForCausalLM"])[0]
    hw = twin["hardware"]
    args, warnings = resolve(ns, version, arch, float(hw.get("memory_gb", 96.0)))
    for w in warnings:
        log(w)
    args["hidden_size"] = hf.get("hidden_size") or hf.get("text_config", {}).get("hidden_size")
    log("server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in sorted(args.items())) + ")")
    if args["tp_size"] > int(hw["gpu_count"]):
        log(f"RuntimeError: tp_size={args['tp_size']} needs {args['tp_size']} GPUs, "
            f"but only {hw['gpu_count']} are visible.")
        return 1
    if args.get("speculative_algorithm"):
        draft = args.get("speculative_draft_model_path")
        if not draft or not os.path.isfile(os.path.join(draft, "config.json")):
            log(f"OSError: draft model {draft!r} does not appear to have a file named config.json.")
            return 1
    try:
        httpd = ThreadingHTTPServer((args["host"], args["port"]), make_handler())
    except OSError as exc:
        log(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
            f"({args['host']!r}, {args['port']}): {exc.strerror.lower() if exc.strerror else exc}")
        return 1
    httpd.daemon_threads = True
    launch_env = set(os.environ)
    _force_env(args, version)
    worker_env = dict(os.environ)
    for name in twin["server"].get("worker_env_drop") or []:
        worker_env.pop(name, None)
    worker_env.update(twin["server"].get("worker_env_set") or {})
    tp = int(args["tp_size"])
    tag = "TP0" if tp > 1 else ""
    payload = {"tp": tp, "parent": os.getpid(), "args": args,
               "title_hides_env": [k for k in worker_env if k not in launch_env] if measured_0517(version) else None}
    tracker = start_resource_tracker(worker_env) if measured_0517(version) else None
    children = spawn_children(tp, worker_env, payload)
    pid_dir = os.path.join(root, "run", "pids")
    os.makedirs(pid_dir, exist_ok=True)
    pidfile = os.path.join(pid_dir, f"{os.getpid()}.json")
    procs = [{"pid": os.getpid(), "starttime": proc_starttime(os.getpid()), "title": "main"}]
    from .perf import gpus_for

    gpus = gpus_for(hw, worker_env, tp, int(args.get("base_gpu_id") or 0))
    procs += [{"pid": p.pid, "starttime": proc_starttime(p.pid), "title": t,
               **({"gpu": gpus[i] if i < len(gpus) else gpus[0]} if t.startswith("sglang::scheduler") else {})}
              for i, (t, p) in enumerate(children)]
    with open(pidfile, "w", encoding="utf-8") as fh:
        json.dump({"port": args["port"], "procs": procs}, fh)

    def stop_children() -> None:
        for _, p in children + ([("resource_tracker", tracker)] if tracker else []):
            if p.poll() is None:
                p.kill()
        for _, p in children:
            try:
                p.wait(timeout=2)
            except Exception:
                pass
        try:
            os.unlink(pidfile)
        except OSError:
            pass

    perf = None
    for title, p in children:
        assert p.stdout is not None
        line = p.stdout.readline()
        msg = json.loads(line) if line.strip() else {"error": f"{title} exited with code {p.poll()}"}
        if "error" in msg:
            _traceback(msg["error"], msg.get("file"), tag, version, msg.get("tree"), int(msg.get("line") or 1))
            stop_children()
            httpd.server_close()
            return 1
        if "perf" in msg:
            perf = msg["perf"]
    assert perf is not None
    from .gpumem import check_launch

    memory = check_launch(root, twin, gpus[:tp], float(args.get("mem_fraction_static") or 0.88),
                          speculative=bool(perf["speculative"]), own_pid=os.getpid(), args=args)
    if memory is not None and not memory.ok:
        if memory.stage != "init":  # the TP balance check fails before loading; the others after it began
            log(f"Load weight begin. avail mem={memory.avail_gb:.2f} GB", tag)
        if memory.stage == "kv":
            log(f"Load weight end. type={arch}, dtype=torch.bfloat16, avail mem={memory.after_load_gb:.2f} GB, "
                f"mem usage={memory.avail_gb - memory.after_load_gb:.2f} GB.", tag)
        _traceback(memory.error, None, tag, version)
        stop_children()
        httpd.server_close()
        return 1
    if memory is not None:  # what this server holds on each GPU: nvidia-smi and later launches see it
        for p in procs:
            if "gpu" in p:
                p["mem_mib"] = memory.held_mib.get(int(p["gpu"]), 0)
        with open(pidfile, "w", encoding="utf-8") as fh:
            json.dump({"port": args["port"], "procs": procs}, fh)
    mem = float(hw.get("memory_gb", 96.0))
    lt = launch_seconds(twin, speculative=bool(perf["speculative"]), cuda_graph=not args.get("disable_cuda_graph"),
                        args=args)
    max_total = int(twin["server"].get("max_total_num_tokens", 400000))
    if measured_0517(version):
        darch = None
        if perf["speculative"]:
            with open(os.path.join(args["speculative_draft_model_path"], "config.json"), encoding="utf-8") as fh:
                darch = (json.load(fh).get("architectures") or ["LlamaForCausalLMEagle3"])[0]
        gm = memory_config(twin, args)
        log_startup_0517(lambda m: log(m, tag), args=args, lt=lt, mem_gb=mem, weights_gb=gm.weights_gb / max(tp, 1),
                         draft_gb=gm.draft_gb, arch=arch, darch=darch, max_total=max_total)
    else:
        _log_startup(args, lt, perf, mem, arch, max_total, tag)
    launch_no = bump_counter(root, "launches")
    seed = int(twin.get("seed", 0)) * 1000003 + launch_no
    perf["launch_number"] = launch_no
    engine = Engine(perf, args, version, seed, float(twin.get("time_scale", 200.0)), max_total)
    httpd.twin_state = {"engine": engine, "args": args, "twin": twin, "version": version, "ready": False,  # type: ignore[attr-defined]
                        "arch": arch, "started": time.time(), "argv": [prog, *argv], "hf": hf}

    def on_term(signum, frame):  # noqa: ARG001
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log("INFO:     Started server process [%d]" % os.getpid())
    log("INFO:     Waiting for application startup.")
    log("INFO:     Application startup complete.")
    log(f"INFO:     Uvicorn running on http://{args['host']}:{args['port']} (Press CTRL+C to quit)")
    server_thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    server_thread.start()
    if not args.get("skip_server_warmup"):
        from .http import run_generate

        run_generate(httpd.twin_state, {"text": "The capital city of France is",  # type: ignore[attr-defined]
                                        "sampling_params": {"max_new_tokens": 8, "temperature": 0}}, None)
        if measured_0517(version):  # the real warm-up took ~5 s: /health answered 503 all along
            time.sleep(5.0 / float(twin.get("time_scale", 200.0)))
        log('INFO:     127.0.0.1:0 - "POST /generate HTTP/1.1" 200 OK')
    httpd.twin_state["ready"] = True  # type: ignore[attr-defined]
    log("The server is fired up and ready to roll!")
    try:
        while server_thread.is_alive():
            server_thread.join(0.2)
            if any(p.poll() is not None for _, p in children):
                log("Received sigquit from a child process. It usually means the child failed.")
                break
    finally:
        httpd.server_close()
        stop_children()
    return 0


def _log_startup(args: dict, lt, perf: dict, mem: float, arch: str, max_total: int, tag: str) -> None:
    """0.5.9/0.5.23 start-up lines as documented (sglang.md)."""
    log(f"Load weight end. elapsed={lt.load_s:.2f} s, type={arch}, dtype=torch.bfloat16, "
        f"avail mem={mem * 0.38:.2f} GB, mem usage={mem * 0.6:.2f} GB.", tag)
    if perf["speculative"]:
        with open(os.path.join(args["speculative_draft_model_path"], "config.json"), encoding="utf-8") as fh:
            darch = (json.load(fh).get("architectures") or ["LlamaForCausalLMEagle3"])[0]
        log(f"Load weight begin. avail mem={mem * 0.38:.2f} GB", tag)
        log(f"Load weight end. elapsed={lt.draft_load_s:.2f} s, type={darch}, dtype=torch.bfloat16, "
            f"avail mem={mem * 0.36:.2f} GB, mem usage={mem * 0.02:.2f} GB.", tag)
    log(f"KV Cache is allocated. #tokens: {max_total}, KV size: {mem * 0.25:.2f} GB", tag)
    if not args.get("disable_cuda_graph"):
        log(f"Capture cuda graph begin. This can take up to several minutes. avail mem={mem * 0.1:.2f} GB", tag)
        log(f"Capture cuda graph end. Time elapsed: {lt.graph_s:.2f} s. mem usage=1.21 GB. "
            f"avail mem={mem * 0.09:.2f} GB.", tag)
        if perf["speculative"]:
            log(f"Capture draft cuda graph end. Time elapsed: {lt.draft_graph_s:.2f} s. mem usage=0.21 GB. "
                f"avail mem={mem * 0.08:.2f} GB.", tag)
    log(f"max_total_num_tokens={max_total}, chunked_prefill_size={args['chunked_prefill_size']}, "
        f"max_prefill_tokens={args['max_prefill_tokens']}, max_running_requests={args['max_running_requests']}, "
        f"context_len={args.get('context_length') or 262144}", tag)
