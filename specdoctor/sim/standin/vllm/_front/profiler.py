"""vLLM 0.26's torch profiler on the twin: `/start_profile`, `/stop_profile` and the rank trace they write.

Mounted only when `--profiler-config` names a profiler (serve/profile/api_router.py). `/stop_profile` writes, into
`torch_profiler_dir`, the worker's `rank0.<ns>.pt.trace.json.gz` and the API server's own
`vm_<pid>.async_llm.<ns>.pt.trace.json.gz` (CPU only), as the real 0.26.0 did on the H100. The rank trace has the
real one's shape where a reader looks (tests/fixtures/vllm-0.26-h100/trace): per engine step a `python_function`
frame `v1/engine/core.py(617): step_with_batch_queue` holding the model runner v2 frames `execute_model` (verify),
`sample` (with `rejection_sampler.py(103): __call__`) and the speculator's `propose` (draft), each launching CUDA
graphs (`cudaGraphLaunch`) whose kernels carry the launch's `correlation`. The GPU spans are the scenario's phase
times (the noisy step split as k·t_draft : t_verify, a fixed sliver of sampling); host stalls sit as in the SGLang
twin (before verify's frame; inside the draft's frame before its first launch). Simplifications: no other frames,
no cpu_ops, no `user_annotation` of the step, only rank 0's file; `torch_profiler_with_stack=false` writes no frames.
"""

from __future__ import annotations

import gzip
import json
import os
import time

from vllm._twin.profiler import OVERHEAD, Profiler

from .stats import vlog

__all__ = ["VLLMProfiler", "start_profile", "stop_profile"]

_SAMPLE_MS = 0.15  # the real H100's sampling GPU span, batch 1
_HOST_GAP_US = 300.0  # the real step's host work before its forward and between phases (scheduling, bookkeeping)
_FRAMES = {"step": "engine/core.py(617): step_with_batch_queue", "verify": "worker/gpu/model_runner.py(1150): "
           "execute_model", "sample": "worker/gpu/model_runner.py(1085): sample",
           "rejection": "worker/gpu/spec_decode/rejection_sampler.py(103): __call__",
           "draft": "worker/gpu/spec_decode/autoregressive/speculator.py(129): propose"}


class VLLMProfiler(Profiler):
    """One session of vLLM's torch profiler: every step until /stop_profile (no step budget in the request)."""

    def __init__(self, state: dict, cfg: dict):
        super().__init__(state, {})
        self.output_dir = str(cfg.get("torch_profiler_dir") or "")
        self.with_stack = cfg.get("torch_profiler_with_stack", True) not in (False, "false", "False", 0)
        self.ns = time.time_ns()
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the installed vllm package
        self.prefix_path = root + "/v1/"

    def file_name(self) -> str:
        return f"rank0.{self.ns}.pt.trace.json.gz"

    def finish(self, state: dict) -> str:
        if not self.end(state):
            return ""
        path = self.write()
        if path:  # the API server's trace beside it: CPU only, no phases
            front = {"traceEvents": [{"ph": "M", "name": "process_name", "pid": os.getpid(), "tid": 0,
                                      "args": {"name": "python3"}}]}
            with gzip.open(os.path.join(self.output_dir, f"vm_{os.getpid()}.async_llm.{self.ns - 1}.pt.trace.json.gz"),
                           "wt") as fh:
                fh.write(json.dumps(front))
        return path

    def trace(self) -> dict:
        """The chrome-trace document: µs of model time, one engine step per recorded cycle."""
        pid, tid, gpu_tid = os.getpid(), os.getpid(), 7
        ev: list[dict] = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                           "args": {"name": "VLLM::EngineCore"}}]
        ids = iter(range(1, 10**9))
        t = gpu_t = 1_000_000.0
        p = self.perf
        for ms, _bs in self.cycles:
            draft, base = p["k"] * p["t_draft_ms"], p["k"] * p["t_draft_ms"] + p["t_verify_ms"]
            scale = ms / base if base > 0 else 0.0
            host = float(p.get("t_verify_host_ms", 0.0)) * scale
            inside = float(p.get("t_draft_host_ms", 0.0)) * scale
            phases = [("verify", (p["t_verify_ms"] * scale - host - inside) * 1000.0, host * 1000.0, 0.0),
                      ("sample", _SAMPLE_MS * 1000.0, 0.0, 0.0),
                      ("draft", draft * scale * 1000.0, 0.0, inside * 1000.0)]
            gap = OVERHEAD * ms * 1000.0 / len(phases)
            start = t
            t += _HOST_GAP_US
            for phase, dur, before, stall in phases:
                t += before + (gap if phase != "verify" else 0.0)
                launch = max(0.55 * dur, 20.0)
                frame_start = t
                if phase == "sample":
                    self._frame(ev, "rejection", pid, tid, t + 5.0, launch - 10.0)
                corr = next(ids)
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": pid, "tid": tid,
                           "ts": t + 8.0 + stall, "dur": 10.0, "args": {"cbid": 311, "correlation": corr}})
                if self.gpu:
                    g0 = max(gpu_t, t + 20.0 + stall)
                    for i in range(3):
                        ev.append({"ph": "X", "cat": "kernel", "name": f"twin_{phase}_kernel_{i}", "pid": 0,
                                   "tid": gpu_tid, "ts": g0 + dur * i / 3, "dur": dur / 3,
                                   "args": {"device": 0, "stream": gpu_tid, "correlation": corr}})
                    gpu_t = g0 + dur
                t += launch + stall
                self._frame(ev, phase, pid, tid, frame_start, t - frame_start)
                t += 20.0
            t = max(t, gpu_t) + 30.0  # the step's bookkeeping waits for the sampled ids (an event sync)
            self._frame(ev, "step", pid, tid, start, t - start - 5.0)
        ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                   "ts": 1_000_000.0, "dur": t - 1_000_000.0})
        return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": ev,
                "with_stack": self.with_stack, "traceName": self.file_name()}

    def _frame(self, ev: list[dict], key: str, pid: int, tid: int, ts: float, dur: float) -> None:
        if self.with_stack:
            ev.append({"ph": "X", "cat": "python_function", "name": self.prefix_path + _FRAMES[key], "pid": pid,
                       "tid": tid, "ts": ts, "dur": dur, "args": {"Python id": 0}})


def start_profile(state: dict) -> tuple[int, str]:
    """POST /start_profile: 200 with an empty body; a second start while one runs is ignored (the worker's
    profiler wrapper logs and keeps the running session)."""
    vlog("Starting profiler...", where="api_router.py:23")
    if state.get("profiler") is None:
        state["profiler"] = VLLMProfiler(state, state["args"].get("profiler_config") or {})
    vlog("Profiler started.", where="api_router.py:25")
    return 200, ""


def stop_profile(state: dict) -> tuple[int, str]:
    """POST /stop_profile: write the traces (the call returns once they are written), 200 with an empty body."""
    vlog("Stopping profiler...", where="api_router.py:31")
    prof = state.get("profiler")
    if prof is not None:
        prof.finish(state)
    vlog("Profiler stopped.", where="api_router.py:33")
    return 200, ""
