"""vLLM's torch-profiler trace (`/start_profile` → `<dir>/rank<r>.<ns>.pt.trace.json.gz`) → per-cycle phase times.

vLLM (0.26) names no phase ranges unless `VLLM_CUSTOM_SCOPES_FOR_PROFILING` is set; its one `user_annotation` per
step (`execute_context_N(..)_generation_M(..)`, profiler/wrapper.py:305 via gpu_worker.py:967) covers the target
forward only. With the profiler's default `with_stack=True` every Python frame is a `python_function` event, and
the reader keys on those, by path and function name (line numbers drift between versions):

- cycle: `v1/engine/core.py: step_with_batch_queue` (async scheduling, 0.26's default) or `step` — one engine step
  (a worker's trace at TP > 1 has none: a cycle there runs from one target forward to the next);
- verify: `v1/worker/gpu/model_runner.py: execute_model` (model runner v2, model_runner.py:1150) or
  `v1/worker/gpu_model_runner.py: execute_model` (v1 runner, :4111) — the target forward on the k+1 tokens;
- sample: `gpu/model_runner.py: sample` (v2, :1085, logits + rejection sampling) or `gpu_model_runner.py: _sample`
  (v1, :3637);
- draft: a `propose` under `spec_decode/` (v2 `gpu/spec_decode/autoregressive/speculator.py:129`; v1
  `v1/spec_decode/llm_base_proposer.py:502`) or v1's `gpu_model_runner.py: propose_draft_token_ids` (:4954),
  the outermost one of a cycle; it holds the draft's forward on the accepted tokens and its k-1 further steps;
- a decode cycle is one whose step ran the rejection sampler (`spec_decode/rejection_sampler.py` `__call__`, or
  `v1/sample/rejection_sampler.py` `forward`); the prefill step runs the plain sampler.
Each range is timed as in the SGLang reader (`torch_trace`): GPU span of the work its thread launched inside it
(kernels correlated with its runtime calls, graphs included), host time before it, inside it before its first
launch, and after its GPU work. The real H100 trace (0.26.0, model runner v2, CUDA graphs, Llama target + EAGLE-3,
k=3, batch 1, 16 decode cycles): cycle wall ≈ 4.9 ms; verify GPU ≈ 1.8 ms, sample ≈ 0.4 ms, draft ≈ 0.9 ms.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, Literal

from pydantic import Field

from .errors import ParseError
from .torch_trace import (
    Phase,
    PhaseRange,
    PhaseTrace,
    TraceIndex,
    categories,
    first_launch,
    gpu_span,
    guard_parse,
    index_trace,
    launched_work,
    load_trace,
    num_field,
    process_name,
)

__all__ = ["VLLMTrace", "parse_vllm_trace", "RANK_TRACE", "FRAME_PHASE"]

#: A rank's trace as vLLM's torch profiler names it (torch's tensorboard handler: `rank<r>.<ns>.pt.trace.json.gz`;
#: the API server writes `<worker>.async_llm.<ns>.pt.trace.json.gz` beside it, with no GPU work).
RANK_TRACE = re.compile(r"^rank(?P<rank>\d+)\.(?P<ts>\d+)\.pt\.trace\.json(?:\.gz)?$")
_FRAME = r"(?:^|/)vllm/v1/{}\.py\(\d+\): {}$"
#: Python frames that are phases, in the order tried.
FRAME_PHASE: tuple[tuple[re.Pattern[str], Phase], ...] = (
    (re.compile(_FRAME.format(r"worker/(?:gpu/model_runner|gpu_model_runner)", "execute_model")), "verify"),
    (re.compile(_FRAME.format(r"worker/gpu/model_runner", "sample")), "sample"),
    (re.compile(_FRAME.format(r"worker/gpu_model_runner", "_sample")), "sample"),
    (re.compile(_FRAME.format(r"(?:worker/gpu/)?spec_decode/[\w/]+", "propose")), "draft"),
    (re.compile(_FRAME.format(r"worker/gpu_model_runner", "propose_draft_token_ids")), "draft"),
)
_SOURCE = re.compile(r"(?:^|/)(vllm/(?!vllm/)[\w/]+\.py)\(\d+\): ")
_RUNNERS = {"vllm/v1/worker/gpu/model_runner.py": "v2", "vllm/v1/worker/gpu_model_runner.py": "v1"}
_CYCLE = re.compile(_FRAME.format("engine/core", "(?:step|step_with_batch_queue)"))
_REJECTION = re.compile(_FRAME.format(r"(?:worker/gpu/spec_decode|sample)/rejection_sampler", "(?:__call__|forward)"))


class VLLMTrace(PhaseTrace):
    """The phase ranges of one vLLM rank trace; `ranges` hold draft, verify and sample, cycles are engine steps."""

    frames: int = Field(default=0, description="python_function events (0: the trace was taken with_stack off and "
                        "the phases cannot be found).")
    ran_files: list[str] = Field(default_factory=list, description="vLLM source files (`vllm/…`) with a Python frame "
                                 "in the trace: code that ran while profiled. A patched file absent from it did not "
                                 "run in the profiled steps (the real H100 'draftsync' patch in "
                                 "v1/spec_decode/llm_base_proposer.py, off model runner v2's path).")
    model_runner: Literal["v1", "v2"] | None = Field(default=None, description="Which GPU model runner ran the "
                                                     "steps (0.26 defaults to v2 for dense models).")
    dropped: int = Field(default=0, description="Phase frames that put no work on the GPU (a step with nothing "
                         "scheduled returns before its forward), left out of a trace that has GPU work.")

    def samples(self, phase: Phase) -> list[float]:
        """One value per decode cycle in ms (the prefill step's forward, sampling and draft prefill are others)."""
        return [r.ms for r in self.ranges if r.phase == phase and r.decode_cycle]

    def cpu_samples(self, phase: Phase) -> list[float]:
        return [r.cpu_ms for r in self.ranges if r.phase == phase and r.decode_cycle]

    def host_samples(self, phase: Phase) -> list[float]:
        return [(r.host_before_ms or 0.0) + (r.host_inside_ms or 0.0) + r.host_after_gpu_ms for r in self.ranges
                if r.host_after_gpu_ms is not None and r.phase == phase and r.decode_cycle]


def _frame_phase(name: str) -> Phase | None:
    return next((ph for pat, ph in FRAME_PHASE if pat.search(name)), None)


def parse_vllm_trace(data: bytes | str) -> VLLMTrace:
    """Read a vLLM rank trace (gzip'd or plain JSON) into its phase ranges; `ParseError` on anything else."""
    return guard_parse(_parse, data)


def _outermost(hits: list[tuple[dict[str, Any], Phase]]) -> list[tuple[dict[str, Any], Phase]]:
    """Drop a frame nested in an earlier one of the same phase on its thread (v1's propose_draft_token_ids holds
    the drafter's propose: one draft range a cycle)."""
    out: list[tuple[dict[str, Any], Phase]] = []
    open_until: dict[tuple[Any, Phase], float] = {}
    for e, ph in hits:
        key, ts = (e.get("tid"), ph), num_field(e, "ts")
        if ts < open_until.get(key, -1.0):
            continue
        open_until[key] = ts + num_field(e, "dur")
        out.append((e, ph))
    return out


def _range(e: dict[str, Any], phase: Phase, idx: TraceIndex, cycle: int | None) -> PhaseRange:
    ts, dur = num_field(e, "ts"), num_field(e, "dur")
    work = launched_work(e, ts, dur, idx)
    span = gpu_span(None, work)
    first = first_launch(e, ts, dur, idx) if span is not None else None
    name = str(e["name"]).rsplit("/", 1)[-1]  # `model_runner.py(1150): execute_model`: no machine path
    return PhaseRange(name=name, phase=phase, cpu_ms=dur / 1000.0, cycle=cycle, kernels=len(work),
                      gpu_ms=None if span is None else (span[1] - span[0]) / 1000.0,
                      gpu_start_ms=None if span is None else span[0] / 1000.0,
                      gpu_end_ms=None if span is None else span[1] / 1000.0,
                      gpu_busy_ms=sum(num_field(k, "dur") for k in work) / 1000.0 if work else None,
                      host_inside_ms=None if first is None else max(first - ts, 0.0) / 1000.0,
                      host_after_gpu_ms=None if span is None else max(ts + dur - span[1], 0.0) / 1000.0)


def _cycles(frames: list[dict[str, Any]], hits: list[tuple[dict[str, Any], Phase]]) -> list[tuple[float, float, Any]]:
    """(start µs, end µs, thread) of each engine step; a worker's trace (TP > 1: the model runs in `VLLM::Worker_TP<r>`
    processes, the step loop in the engine core) has no step frame, so there a cycle runs from one target forward to
    the next (the last: to its last phase frame's end)."""
    steps = [(num_field(e, "ts"), num_field(e, "ts") + num_field(e, "dur"), e.get("tid")) for e in frames
             if _CYCLE.search(str(e.get("name")))]
    if steps:
        return steps
    fwd = [e for e, ph in hits if ph == "verify"]
    last = max((num_field(e, "ts") + num_field(e, "dur") for e, _ in hits), default=0.0)
    return [(num_field(e, "ts"), num_field(fwd[i + 1], "ts") if i + 1 < len(fwd) else last, e.get("tid"))
            for i, e in enumerate(fwd)]


def _parse(data: bytes | str) -> VLLMTrace:
    events = [e for e in load_trace(data)["traceEvents"] if isinstance(e, dict)]
    frames = sorted((e for e in events if e.get("cat") == "python_function" and e.get("ph") == "X"),
                    key=lambda e: num_field(e, "ts"))
    if not frames:
        raise ParseError("no python_function events in the trace: vLLM's phases are read from its Python frames "
                         "(the torch profiler's with_stack, on by default in --profiler-config)")
    hits = [(e, ph) for e in frames if (ph := _frame_phase(str(e.get("name")))) is not None]
    if not hits:
        raise ParseError("no vLLM phase frames (model runner execute_model, sample, a spec_decode propose)")
    idx = index_trace(events, _cycles(frames, hits))
    starts = [b[0] for b in idx.batches]

    def cycle_of(e: dict[str, Any]) -> int | None:
        i, ts = bisect.bisect_right(starts, num_field(e, "ts")) - 1, num_field(e, "ts")
        return i if i >= 0 and idx.batches[i][0] <= ts <= idx.batches[i][1] else None

    decode = {c for e in frames if _REJECTION.search(str(e.get("name"))) and (c := cycle_of(e)) is not None}
    ranges: list[PhaseRange] = []
    dropped, has_gpu = 0, bool(idx.gpu_by_corr)
    closed: dict[tuple[int, Any], float] = {}  # (cycle, thread) -> when its last phase range closed (µs)
    for e, ph in _outermost(hits):
        c = cycle_of(e)
        r = _range(e, ph, idx, c)
        if has_gpu and r.gpu_ms is None:
            dropped += 1
            continue
        if c is not None:
            r.decode_cycle = c in decode
            if r.gpu_ms is not None:
                key, ts = (c, e.get("tid")), num_field(e, "ts")
                r.host_before_ms = max(ts - closed.get(key, idx.batches[c][0]), 0.0) / 1000.0
                closed[key] = max(closed.get(key, 0.0), ts + num_field(e, "dur"))
        ranges.append(r)
    ran = sorted({m[1] for e in frames if (m := _SOURCE.search(str(e.get("name"))))})
    runner = next((_RUNNERS[f] for f in ran if f in _RUNNERS), None)
    return VLLMTrace(ran_files=ran, model_runner=runner, ranges=ranges, events=len(events), categories=categories(events), frames=len(frames), dropped=dropped,
                     gpu_annotations=any(e.get("cat") == "gpu_user_annotation" for e in events),
                     process_name=process_name(events), batch_starts_ms=[s / 1000.0 for s in starts],
                     batch_ends_ms=[b[1] / 1000.0 for b in idx.batches])
