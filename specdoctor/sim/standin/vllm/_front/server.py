"""The stand-in `vllm serve` / api_server process: flags, the env vLLM writes, its children, start-up lines, HTTP.

Processes as vLLM 0.26 has them: this main (the API server), `VLLM::EngineCore` (which runs the model at TP=1) and
`VLLM::Worker_TP<r>` at TP>1 (here children of the main; in vLLM they are the engine core's). The performance is the
shared twin model's, evaluated by the rank-0 process from its own environment and the checkout it imports.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from http.server import ThreadingHTTPServer

from vllm._twin.config import bump_counter, load_twin, sandbox_root
from vllm._twin.gpumem import check_launch, launch_seconds, memory_config
from vllm._twin.perf import gpus_for
from vllm._twin.workers import proc_starttime, spawn_children, start_resource_tracker

from .args import FlagError, parse_args
from .http import make_handler
from .stats import VllmEngine, vlog

__all__ = ["main"]


def _force_env(tp: int) -> None:
    """What `import vllm` writes (env_override.py:101-120) and the multiproc executor for workers (:1077)."""
    env = os.environ
    env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    env.setdefault("TRITON_CACHE_AUTOTUNING", "1")
    env.setdefault("TILELANG_CLEANUP_TEMP_FILES", "1")
    if tp > 1:
        env.setdefault("OMP_NUM_THREADS", "1")


def _fail(msg: str) -> int:
    vlog(msg, where="core.py:1290", proc="EngineCore", level="ERROR")
    vlog("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
         where="api_server.py:1300", level="ERROR")
    return 1


def main(argv: list[str], entry: str) -> int:
    """`vllm serve MODEL ...` and `python -m vllm.entrypoints.openai.api_server --model MODEL ...`."""
    twin = load_twin()
    version = twin["version"]
    try:
        args = parse_args(argv, entry)
    except FlagError as exc:
        sys.stderr.write(f"usage: vllm {'serve' if entry == 'serve' else ''} [model_tag] [options]\n"
                         f"vllm: error: {exc}\n")
        return 2
    root = sandbox_root()
    vlog(f"vLLM server version {version}, serving model {args['model_path']}", where="utils.py:325")
    vlog(f"non-default args: {args.get('speculative_config') and {'speculative_config': args['speculative_config']} or {}}",
         where="utils.py:273")
    cfg = os.path.join(args["model_path"], "config.json")
    if not os.path.isfile(cfg):
        return _fail(f"OSError: {args['model_path']} does not appear to have a file named config.json.")
    with open(cfg, encoding="utf-8") as fh:
        hf = json.load(fh)
    args["hidden_size"] = hf.get("hidden_size")
    hw = twin["hardware"]
    tp = int(args["tp_size"])
    if tp > int(hw["gpu_count"]):
        return _fail(f"ValueError: World size ({tp}) is larger than the number of available GPUs ({hw['gpu_count']}).")
    draft = args.get("speculative_draft_model_path")
    if args.get("speculative_algorithm") and (not draft or not os.path.isfile(os.path.join(draft, "config.json"))):
        return _fail(f"OSError: {draft} does not appear to have a file named config.json.")
    if args["disable_cuda_graph"] and args.get("enforce_eager"):
        vlog("Enforce eager set, disabling torch.compile and CUDAGraphs. This is equivalent to setting "
             "-cc.mode=none -cc.cudagraph_mode=none", where="vllm.py:1163", level="WARNING")
        vlog("Cudagraph is disabled under eager mode", where="vllm.py:1392")
    try:
        httpd = ThreadingHTTPServer((args["host"], args["port"]), make_handler())
    except OSError as exc:
        vlog(f"OSError: [Errno {exc.errno}] error while attempting to bind on address ({args['host']!r}, "
             f"{args['port']}): address already in use", where="api_server.py:690", level="ERROR")
        return 1
    httpd.daemon_threads = True
    _force_env(tp)
    worker_env = dict(os.environ)
    for name in twin["server"].get("worker_env_drop") or []:
        worker_env.pop(name, None)
    worker_env.update(twin["server"].get("worker_env_set") or {})
    # As on the real 0.26 box (H100, 2026-12-06): multiprocessing's untitled resource_tracker beside the engine
    # core, and the engine core's /proc/PID/environ losing its first variables to its title (the later ones kept).
    tracker = start_resource_tracker(worker_env)
    keys = list(worker_env)
    children = spawn_children(tp, worker_env, {"tp": tp, "parent": os.getpid(), "args": args, "engine": "vllm",
                                               "title_hides_env": keys[len(keys) // 2:]})
    gpus = gpus_for(hw, worker_env, tp, 0)
    pid_dir = os.path.join(root, "run", "pids")
    os.makedirs(pid_dir, exist_ok=True)
    pidfile = os.path.join(pid_dir, f"{os.getpid()}.json")
    procs = [{"pid": os.getpid(), "starttime": proc_starttime(os.getpid()), "title": "main"}]
    holders = [t for t, _ in children if t.startswith("VLLM::Worker") or (tp == 1 and t == "VLLM::EngineCore")]
    for t, p in children:
        rec = {"pid": p.pid, "starttime": proc_starttime(p.pid), "title": t}
        if t in holders:
            rec["gpu"] = gpus[holders.index(t)] if holders.index(t) < len(gpus) else gpus[0]
        procs.append(rec)
    with open(pidfile, "w", encoding="utf-8") as fh:
        json.dump({"port": args["port"], "procs": procs}, fh)

    def stop_children() -> None:
        for _, p in [*children, ("resource_tracker", tracker)]:
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
            stop_children()
            httpd.server_close()
            where = f'  File "{msg["file"]}", line {msg.get("line") or 1}, in <module>\n' if msg.get("file") else ""
            sys.stderr.write(f"Traceback (most recent call last):\n{where}{msg['error']}\n")
            return _fail(f"EngineCore failed to start: {msg['error']}")
        perf = perf or msg.get("perf")
    assert perf is not None
    memory = check_launch(root, twin, gpus[:tp], float(args["mem_fraction_static"]),
                          speculative=bool(perf["speculative"]), own_pid=os.getpid(), args=args)
    if memory is not None and not memory.ok:
        stop_children()
        httpd.server_close()
        return _fail(f"ValueError: {memory.error}")
    if memory is not None:
        for p in procs:
            if "gpu" in p:
                p["mem_mib"] = memory.held_mib.get(int(p["gpu"]), 0)
        with open(pidfile, "w", encoding="utf-8") as fh:
            json.dump({"port": args["port"], "procs": procs}, fh)
    lt = launch_seconds(twin, speculative=bool(perf["speculative"]), cuda_graph=not args["disable_cuda_graph"],
                        args=args)
    spec = args.get("speculative_config")
    vlog(f"Initializing a V1 LLM engine (v{version}) with config: model={args['model_path']!r}, "
         f"speculative_config={spec!r}, tensor_parallel_size={tp}, enforce_eager={args.get('enforce_eager')}",
         where="core.py:117", proc="EngineCore")
    weights = memory_config(twin, args).weights_gb / tp
    # model runner v2's lines, as the real 0.26 server wrote them (H100, 2026-12-06: worker/gpu/model_runner.py)
    vlog(f"Model loading took {weights:.2f} GiB and {lt.load_s + lt.draft_load_s:.6f} seconds",
         where="model_runner.py:305", proc="EngineCore")
    if not args["disable_cuda_graph"]:
        vlog(f"Graph capturing finished in {lt.graph_s + lt.draft_graph_s:.0f} secs, took 0.61 GiB",
             where="model_runner.py:747", proc="EngineCore")
    seed = int(twin.get("seed", 0)) * 1000003 + bump_counter(root, "launches")
    engine = VllmEngine(perf, args, version, seed, float(twin.get("time_scale", 200.0)),
                        int(twin["server"].get("max_total_num_tokens", 400000)))
    httpd.twin_state = {"engine": engine, "args": args, "twin": twin, "version": version,  # type: ignore[attr-defined]
                        "ready": False, "started": time.time(), "argv": argv, "hf": hf}

    def on_term(signum, frame):  # noqa: ARG001
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    vlog(f"Starting vLLM server on http://{args['host']}:{args['port']}", where="api_server.py:677")
    server_thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    server_thread.start()
    httpd.twin_state["ready"] = True  # type: ignore[attr-defined]
    vlog("Application startup complete.", where="on.py:62")
    try:
        while server_thread.is_alive():
            server_thread.join(0.2)
            if any(p.poll() is not None for _, p in children):
                vlog("Engine core proc EngineCore died unexpectedly, shutting down client.",
                     where="core_client.py:600", level="ERROR")
                break
    finally:
        httpd.server_close()
        stop_children()
    return 0
