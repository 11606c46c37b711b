"""What every engine's torch-profiler trace reader shares: the phase-range models and how a range is timed.

A range (SGLang: a named `user_annotation`; vLLM: a Python frame) is timed by the GPU work its own thread launched
inside it: the runtime calls (`cuda_runtime`, `cuda_driver`) in its time window, and the kernels, copies and sets
whose `correlation` matches them (a `cudaGraphLaunch` carries a whole graph's kernels). See `sglang_trace` and
`vllm_trace` for what each engine's trace holds.
"""

from __future__ import annotations

import bisect
import gzip
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, Field

from .errors import ParseError
from .text import clean_text

__all__ = ["guard_parse", "Phase", "PhaseRange", "CycleAccount", "PhaseTrace", "TraceIndex", "LAUNCH_CATS", "GPU_CATS",
           "load_trace", "num_field", "categories", "index_trace", "first_launch", "launched_work", "gpu_span",
           "process_name", "external_id"]

Phase = Literal["draft", "verify", "draft_extend", "decode", "extend", "sample"]
"""A phase a reader names (`sample`: vLLM's logits + rejection sampling, timed apart from verify)."""
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


class PhaseRange(BaseModel):
    """One instance of a named phase range: its CPU (launch) time and the GPU time of the work it launched."""

    name: str = Field(description="The range's name in the trace, e.g. 'step[TARGET_VERIFY bs=1]'.")
    phase: Phase
    batch_size: int | None = None
    cpu_ms: float = Field(description="Duration of the CPU `user_annotation` range (launch time under graphs).")
    gpu_ms: float | None = Field(default=None, description="GPU span of its work: first kernel start to last "
                                 "kernel end (the profiler's `gpu_user_annotation`, else rebuilt from kernels).")
    gpu_busy_ms: float | None = Field(default=None, description="Summed duration of the kernels it launched.")
    host_after_gpu_ms: float | None = Field(default=None, description="How long the CPU range stayed open after "
                                            "its GPU work ended (0 when it closed first, as graphs replay after "
                                            "launch): host-only time in the phase, e.g. a sync then a sleep.")
    host_before_ms: float | None = Field(default=None, description="Host time between the previous phase range of "
                                         "its cycle closing (or the cycle's start) and this range opening: the "
                                         "host work the phase waits on, e.g. a sync then a sleep before it.")
    host_inside_ms: float | None = Field(default=None, description="Host time inside the range before its first "
                                         "launch (range open -> its thread's first runtime call with GPU work, a "
                                         "sync or a query is none): a stall at the "
                                         "start of the phase's method, e.g. a sync then a sleep before its GPU work.")
    kernels: int = 0
    gpu_start_ms: float | None = Field(default=None, description="When its GPU work began (trace clock, ms).")
    gpu_end_ms: float | None = Field(default=None, description="When its GPU work ended (trace clock, ms).")
    cycle: int | None = Field(default=None, description="Index of the enclosing cycle (`batch_starts_ms`).")
    decode_cycle: bool = Field(default=False, description="Its run_batch is a speculative decode cycle "
                               "(holds a TARGET_VERIFY), so a draft_extend here is the decode one, not prefill's.")

    @property
    def ms(self) -> float:
        """The phase's time: GPU span when the trace has GPU events, else the CPU range."""
        return self.gpu_ms if self.gpu_ms is not None else self.cpu_ms


class CycleAccount(BaseModel):
    """One decode cycle's wall time split so that the parts add up: each phase's GPU span, the GPU idle before it
    (host time the phase waited on: before or inside its range), and the rest (after the last phase's GPU work
    until the next cycle began: sampling, output processing, the scheduler's loop)."""

    wall_ms: float = Field(description="This run_batch's start to the next one's (the last: its own duration).")
    gpu_ms: dict[str, float] = Field(default_factory=dict)
    idle_before_ms: dict[str, float] = Field(default_factory=dict)
    rest_ms: float


class PhaseTrace(BaseModel):
    """The phase ranges of one trace and what the trace carried to time them (each engine's reader fills it)."""

    ranges: list[PhaseRange] = Field(default_factory=list)
    batch_starts_ms: list[float] = Field(default_factory=list, description="Each cycle's start and end (ms), in "
                                         "order (SGLang: scheduler.run_batch; vLLM: the engine step).")
    batch_ends_ms: list[float] = Field(default_factory=list)
    events: int = 0
    categories: dict[str, int] = Field(default_factory=dict, description="Event count per `cat`.")
    gpu_annotations: bool = Field(default=False, description="The trace has `gpu_user_annotation` projections.")
    process_name: str | None = None

    @property
    def time_basis(self) -> Literal["gpu", "cpu"]:
        return "gpu" if self.ranges and all(r.gpu_ms is not None for r in self.ranges) else "cpu"

    def samples(self, phase: Phase) -> list[float]:
        """One value per cycle in ms; draft-extend only from decode cycles (prefill's is another forward)."""
        return [r.ms for r in self.ranges if r.phase == phase and (phase != "draft_extend" or r.decode_cycle)]

    def cpu_samples(self, phase: Phase) -> list[float]:
        return [r.cpu_ms for r in self.ranges if r.phase == phase and (phase != "draft_extend" or r.decode_cycle)]

    def host_samples(self, phase: Phase) -> list[float]:
        """Host time per cycle (GPU traces only): the gap before each range opened, the time inside it before its
        first launch, and how long it stayed open after its GPU work ended — where a host stall of the phase shows,
        wherever in or around the range it sits."""
        return [(r.host_before_ms or 0.0) + (r.host_inside_ms or 0.0) + r.host_after_gpu_ms for r in self.ranges
                if r.host_after_gpu_ms is not None and r.phase == phase and (phase != "draft_extend" or r.decode_cycle)]

    def cycles(self) -> int:
        return len({r.cycle for r in self.ranges if r.decode_cycle})

    def accounts(self) -> list[CycleAccount]:
        """Every decode cycle's wall time as GPU per phase + GPU idle before each phase + the rest (GPU traces)."""
        out = []
        by: dict[int, list[PhaseRange]] = defaultdict(list)
        for r in self.ranges:
            if r.decode_cycle and r.cycle is not None and r.gpu_start_ms is not None and r.gpu_end_ms is not None:
                by[r.cycle].append(r)
        for c, rs in sorted(by.items()):
            if c >= len(self.batch_starts_ms):
                continue
            start = self.batch_starts_ms[c]
            end = self.batch_starts_ms[c + 1] if c + 1 < len(self.batch_starts_ms) else self.batch_ends_ms[c]
            gpu: dict[str, float] = defaultdict(float)
            idle: dict[str, float] = defaultdict(float)
            t = start
            for r in sorted(rs, key=lambda x: x.gpu_start_ms or 0.0):
                idle[r.phase] += max((r.gpu_start_ms or 0.0) - t, 0.0)
                gpu[r.phase] += (r.gpu_end_ms or 0.0) - max(r.gpu_start_ms or 0.0, t)
                t = max(t, r.gpu_end_ms or 0.0)
            out.append(CycleAccount(wall_ms=end - start, gpu_ms=dict(gpu), idle_before_ms=dict(idle),
                                    rest_ms=max(end - t, 0.0)))
        return out


T = TypeVar("T")


def guard_parse(parse: Callable[[bytes | str], T], data: bytes | str) -> T:
    """An engine reader's `parse(data)`, with any malformed event (a field missing, a wrong type) turned into
    one `ParseError` line instead of a traceback."""
    try:
        return parse(data)
    except ParseError:
        raise
    except (TypeError, KeyError, AttributeError, ValueError, OverflowError) as exc:
        raise ParseError(f"malformed trace event: {type(exc).__name__}: {str(exc)[:80]}") from None


def load_trace(data: bytes | str) -> dict[str, Any]:
    raw = clean_text(data).encode() if isinstance(data, str) else data  # text pasted from a terminal: undecorated
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ParseError(f"not a readable gzip trace: {exc}") from None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"not a JSON trace: {str(exc)[:80]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ParseError("not a chrome trace: no 'traceEvents' list")
    return doc


def num_field(e: dict[str, Any], key: str) -> float:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise ParseError(f"event {str(e.get('name'))[:60]!r} has no numeric {key!r}")
    return float(v)


class TraceIndex(NamedTuple):
    """What timing a phase range looks up: GPU projections by External id, runtime launches in time order,
    GPU work by correlation id, and the engine's cycles in time order."""

    gua: dict[Any, dict[str, Any]]
    launches: list[tuple[float, dict[str, Any]]]
    launch_ts: list[float]
    gpu_by_corr: dict[Any, list[dict[str, Any]]]
    batches: list[tuple[float, float, Any]]


def categories(events: list[dict[str, Any]]) -> dict[str, int]:
    cats: dict[str, int] = defaultdict(int)
    for e in events:
        cats[str(e.get("cat"))] += 1
    return cats


def process_name(events: list[dict[str, Any]]) -> str | None:
    return next((str((e.get("args") or {}).get("name")) for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name" and isinstance(e.get("args"), dict)), None)


def index_trace(events: list[dict[str, Any]], batches: list[tuple[float, float, Any]]) -> TraceIndex:
    """The lookups a phase range's timing needs, with the engine's cycles (start µs, end µs, thread) in time order."""
    gua = {external_id(e): e for e in events if e.get("cat") == "gpu_user_annotation" and external_id(e) is not None}
    launches = sorted(((num_field(e, "ts"), e) for e in events if e.get("cat") in LAUNCH_CATS and e.get("ph") == "X"),
                      key=lambda p: p[0])
    launch_ts = [t for t, _ in launches]
    gpu_by_corr: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") in GPU_CATS and isinstance(e.get("args"), dict):
            gpu_by_corr[e["args"].get("correlation")].append(e)
    return TraceIndex(gua, launches, launch_ts, gpu_by_corr, sorted(batches, key=lambda b: b[0]))


def cycle_finder(batches: list[tuple[float, float, Any]]) -> Callable[[float, Any], int | None]:
    """`find(ts, thread)`: the index of the first of `batches` (sorted by start) on that thread holding ts, or None.

    A thread's cycles follow one another, so the one holding ts is the last to start at or before it (a bisection,
    not a scan of every cycle per range: a real trace holds thousands of both). Where a thread's cycles touch or
    overlap, its lookups scan them in order, which gives the same first match."""
    by_tid: dict[Any, list[tuple[float, float, int]]] = defaultdict(list)
    for i, (b0, b1, tid) in enumerate(batches):
        by_tid[tid].append((b0, b1, i))
    starts = {tid: [b[0] for b in bs] for tid, bs in by_tid.items()}
    apart = {tid: all(bs[k][0] > bs[k - 1][1] for k in range(1, len(bs))) for tid, bs in by_tid.items()}

    def find(ts: float, tid: Any) -> int | None:
        bs = by_tid.get(tid)
        if not bs:
            return None
        if not apart[tid]:
            return next((i for b0, b1, i in bs if b0 <= ts <= b1), None)
        k = bisect.bisect_right(starts[tid], ts) - 1
        return bs[k][2] if k >= 0 and bs[k][1] >= ts else None

    return find


def first_launch(e: dict[str, Any], ts: float, dur: float, idx: TraceIndex) -> float | None:
    """When the range's first runtime call on its own thread that put work on the GPU started (µs); without any
    correlated GPU work, its first runtime call; None when it made none. A runtime call is not a launch: on the real
    H100 a `torch.cuda.synchronize()` then a ~3 ms sleep at the start of the draft method shows as a
    `cudaDeviceSynchronize` 0.02 ms into the draft range and the first kernel launch ~3.5 ms later; counting the sync
    as the first launch read that stall as 0.02 ms of host time inside the range (its CPU range 4.36 ms, the GPU
    idle 3.9 ms before its work) and no phase was named."""
    lo, hi = bisect.bisect_left(idx.launch_ts, ts), bisect.bisect_right(idx.launch_ts, ts + dur)
    own = [(t, r) for t, r in idx.launches[lo:hi] if r.get("tid") == e.get("tid")]
    return next((t for t, r in own if isinstance(r.get("args"), dict)
                 and idx.gpu_by_corr.get(r["args"].get("correlation"))), own[0][0] if own else None)


def launched_work(e: dict[str, Any], ts: float, dur: float, idx: TraceIndex) -> list[dict[str, Any]]:
    """The GPU events launched, on the range's own thread, inside [ts, ts + dur]."""
    lo, hi = bisect.bisect_left(idx.launch_ts, ts), bisect.bisect_right(idx.launch_ts, ts + dur)
    return [k for _, r in idx.launches[lo:hi] if r.get("tid") == e.get("tid") and isinstance(r.get("args"), dict)
            for k in idx.gpu_by_corr.get(r["args"].get("correlation"), [])]


def gpu_span(span: dict[str, Any] | None, work: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(start, end) in µs: the profiler's GPU projection, else first kernel start to last kernel end, else None."""
    if span is not None:
        return num_field(span, "ts"), num_field(span, "ts") + num_field(span, "dur")
    if work:
        return min(num_field(k, "ts") for k in work), max(num_field(k, "ts") + num_field(k, "dur") for k in work)
    return None


def external_id(e: dict[str, Any]) -> Any:
    args = e.get("args")
    return args.get("External id") if isinstance(args, dict) else None
