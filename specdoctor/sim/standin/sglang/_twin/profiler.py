"""SGLang's profiler routes (`/start_profile`, `/stop_profile`) and the torch-profiler trace they write.

The trace has the real 0.5.17 trace's shape (tests/fixtures/sglang-0.5.17-h200/trace): per cycle a
`scheduler.run_batch` `user_annotation` on the scheduler thread holding `draft`, `step[TARGET_VERIFY bs=N]` and
`draft_extend` (a plain server: `step[DECODE bs=N]`), each launching its CUDA graph (`cudaGraphLaunch`,
`cuda_runtime`) whose kernels (`kernel`, GPU pid 0) carry the launch's `correlation`, an `ac2g` flow pair and a
`gpu_user_annotation` with the range's `External id` spanning them. The GPU spans are the scenario's phase
times for that cycle (its noisy step split as k·t_draft : t_verify); the CPU ranges are shorter (launch time),
as on the real box. A scenario's host stall in verify (`verify_host_ms`: a sync, then host-only work) sits where the
real H200 trace of such a patch put it: before verify's range opens (a wider gap after the draft's range), the
range itself and verify's GPU work unchanged, the GPU idle meanwhile. The
trace is written into its final name over a time that grows with the cycles (much longer with Python stacks,
SGLang's default), as torch's export does. Simplifications: only TP-0's file; no Python frames
or cpu_ops; the scenarios fold draft-extend into the draft steps, so its span is a fixed sliver outside the cycle time. Profiling costs
CPU time between phases (`OVERHEAD` of each profiled cycle), which the wall clock and tok/s see.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time

from .config import log

__all__ = ["OVERHEAD", "Profiler", "start_profile", "stop_profile"]

OVERHEAD = 0.10  # extra CPU time per profiled cycle, as a fraction of the cycle
# Writing the trace takes time, and much more with Python stacks (SGLang's default, with_stack=True): on the real
# 0.5.17 ~260 cycles with stacks made 60 MB and took over a minute. Seconds per profiled cycle, scaled down:
EXPORT_S_PER_CYCLE = {True: 0.02, False: 0.001}
_DRAFT_EXTEND_MS = 0.02
_LAUNCH_FRACTION = 0.55  # a CPU range closes after launching, before its graph finishes on the GPU


class Profiler:
    """One profiling session: the cycles seen since /start_profile, written on /stop_profile or after num_steps."""

    def __init__(self, state: dict, req: dict):
        env_dir = os.environ.get("SGLANG_TORCH_PROFILER_DIR", "/tmp")
        self.output_dir = str(req.get("output_dir") or env_dir)
        self.num_steps = int(req["num_steps"]) if req.get("num_steps") else None
        self.prefix = str(req.get("profile_prefix") or "")
        self.profile_id = str(time.time())
        self.gpu = "GPU" in [str(a).upper() for a in (req.get("activities") or ["CPU", "GPU"])]
        self.with_stack = req.get("with_stack") is not False  # SGLang's default is True
        self.perf = state["engine"].perf
        self.cycles: list[tuple[float, int]] = []  # (step ms, batch size)
        self.lock = threading.Lock()

    def on_step(self, state: dict, ms: float) -> float:
        """Record one forward step; return its wall cost with the profiler's overhead."""
        with self.lock:
            self.cycles.append((ms, max(int(state["engine"].running), 1)))
            done = self.num_steps is not None and len(self.cycles) >= self.num_steps
        if done:
            self.finish(state)
        return ms * (1.0 + OVERHEAD)

    def finish(self, state: dict) -> str:
        """Write the trace (once) and end the session."""
        if not self.end(state):
            return ""
        log("Stop profiling...")
        path = self.write()
        log(f"Profiling done. Traces are saved to: {self.output_dir}")
        return path

    def end(self, state: dict) -> bool:
        """Take this session off the server (False: it had ended already)."""
        with self.lock:
            if state.get("profiler") is not self:
                return False
            state["profiler"] = None
        return True

    def file_name(self) -> str:
        return f"{self.prefix + '-' if self.prefix else ''}{self.profile_id}-TP-0.trace.json.gz"

    def write(self) -> str:
        """Write the trace into its final name over a while, as torch's export does; its path."""
        os.makedirs(self.output_dir, exist_ok=True)
        path = os.path.join(self.output_dir, self.file_name())
        # as torch's export does: the final name is written as it goes, so a reader can find it half written
        text = json.dumps(self.trace())
        chunks = 8
        pause = EXPORT_S_PER_CYCLE[self.with_stack] * len(self.cycles) / chunks
        with gzip.open(path, "wt") as fh:
            for i in range(chunks):
                fh.write(text[len(text) * i // chunks:len(text) * (i + 1) // chunks])
                fh.flush()
                time.sleep(pause)
        return path

    def _phases(self, ms: float) -> list[tuple[str, float, float, float]]:
        """(range name, GPU ms, host ms before it, host ms inside it before its launch) of one cycle of `ms`: the
        noisy step split as k·t_draft : t_verify; verify's host-only part (a sync, a sleep) delays its range, the
        draft's (at the start of its method) delays its launch; neither lengthens any GPU work."""
        p = self.perf
        if not p["speculative"]:
            return [("step[DECODE bs={bs}]", ms, 0.0, 0.0)]
        draft = p["k"] * p["t_draft_ms"]
        base = draft + p["t_verify_ms"]
        scale = ms / base if base > 0 else 0.0
        host = float(p.get("t_verify_host_ms", 0.0)) * scale
        inside = float(p.get("t_draft_host_ms", 0.0)) * scale
        return [("draft", draft * scale, 0.0, inside),
                ("step[TARGET_VERIFY bs={bs}]", p["t_verify_ms"] * scale - host - inside, host, 0.0),
                ("draft_extend", _DRAFT_EXTEND_MS, 0.0, 0.0)]

    def trace(self) -> dict:
        """The chrome-trace document, timestamps in µs of model time."""
        pid, gpu_tid = os.getpid(), 7
        ev: list[dict] = [
            {"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "sglang::scheduler"}},
            {"name": "process_labels", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
            {"name": "process_name", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"name": "sglang::scheduler"}},
            {"name": "process_labels", "ph": "M", "ts": 0, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
        t = 1_000_000.0
        ids = iter(range(1, 10**9))
        for ms, bs in self.cycles:
            gpu_t = t + 40.0
            phases = [(n.format(bs=bs), d * 1000.0, h * 1000.0, i * 1000.0) for n, d, h, i in self._phases(ms)]
            # the profiler's own CPU cost between ranges grows with the cycle's work, not with a host stall's sleep
            gap = OVERHEAD * (ms * 1000.0 - sum(h + i for _, _, h, i in phases)) / max(len(phases), 1)
            batch_id = next(ids)
            start, gpu_start = t, None
            for name, dur, host, inside in phases:
                ext, corr = next(ids), next(ids)
                launch = max(dur * _LAUNCH_FRACTION, 5.0)
                t += host  # a host stall before the phase: the host is busy, its range opens after
                cpu_dur = launch + inside  # a stall at the start of its method: the range is open, nothing launched
                ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": pid, "ts": t + 10.0,
                           "dur": cpu_dur, "args": {"External id": ext, "Record function id": 0, "Ev Idx": ext - 1}})
                # runtime calls that launch nothing, as the real H100 draft range opens: a cudaEventQuery; with a
                # sync + sleep at the start of the method, the cudaDeviceSynchronize before the sleep
                for j, call in enumerate(["cudaEventQuery"] * (name == "draft") + ["cudaDeviceSynchronize"] * (inside > 0)):
                    ev.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": pid, "tid": pid,
                               "ts": t + 10.5 + j, "dur": 0.5, "args": {"cbid": 0, "correlation": next(ids)}})
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": pid, "tid": pid,
                           "ts": t + 12.0 + inside, "dur": max(launch - 4.0, 1.0),
                           "args": {"cbid": 311, "correlation": corr}})
                ev.append({"ph": "s", "id": corr, "pid": pid, "tid": pid, "ts": t + 12.0 + inside, "cat": "ac2g",
                           "name": "ac2g"})
                if self.gpu:
                    g0 = max(gpu_t, t + 14.0 + inside)
                    gpu_start = g0 if gpu_start is None else gpu_start
                    n = 3
                    for i in range(n):  # back-to-back kernels filling the phase's GPU span
                        k0 = g0 + dur * i / n
                        ev.append({"ph": "X", "cat": "kernel", "name": f"twin_{name.split('[')[0]}_kernel_{i}",
                                   "pid": 0, "tid": gpu_tid, "ts": k0, "dur": dur / n,
                                   "args": {"device": 0, "stream": gpu_tid, "correlation": corr}})
                        ev.append({"ph": "f", "id": corr, "pid": 0, "tid": gpu_tid, "ts": k0, "cat": "ac2g",
                                   "name": "ac2g", "bp": "e"})
                    ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": gpu_tid,
                               "ts": g0, "dur": dur, "args": {"External id": ext}})
                    gpu_t = g0 + dur
                t += cpu_dur + gap + 20.0
            t = max(t, gpu_t) + 20.0
            ev.append({"ph": "X", "cat": "user_annotation", "name": "scheduler.run_batch", "pid": pid, "tid": pid,
                       "ts": start, "dur": t - start - 10.0,
                       "args": {"External id": batch_id, "Record function id": 0, "Ev Idx": batch_id - 1}})
            if gpu_start is not None:  # the profiler projects the batch range onto the GPU too
                ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "scheduler.run_batch", "pid": 0,
                           "tid": gpu_tid, "ts": gpu_start, "dur": gpu_t - gpu_start, "args": {"External id": batch_id}})
        ev.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",
                   "ts": 1_000_000.0, "dur": t - 1_000_000.0})
        return {"schemaVersion": 1, "displayTimeUnit": "ms", "baseTimeNanoseconds": int(time.time() * 1e9),
                "traceName": f"/tmp/tmp{self.profile_id.replace('.', '')}.json", "traceEvents": ev}


def start_profile(state: dict, req: dict) -> tuple[int, str]:
    """POST /start_profile: 'Start profiling.' (HTTP 200), or 400 while one runs."""
    if state.get("profiler") is not None:
        return 400, "Profiling is already in progress. Call /stop_profile first.\n"
    prof = Profiler(state, req)
    state["profiler"] = prof
    log(f"Profiling starts. Traces will be saved to: {prof.output_dir} (with profile id: {prof.profile_id})")
    return 200, "Start profiling.\n"


def stop_profile(state: dict) -> tuple[int, str]:
    """POST /stop_profile: write the trace; 400 when no session runs (num_steps may have ended it)."""
    prof = state.get("profiler")
    if prof is None:
        return 400, "Profiling is not in progress. Call /start_profile first.\n"
    prof.finish(state)
    return 200, "Stop profiling. This will take some time.\n"
