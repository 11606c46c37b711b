"""SGLang's torch-profiler trace (`/start_profile` → `<prefix>-<ts>-TP-0.trace.json.gz`) → per-cycle phase times.

SGLang (0.5.17) names its speculative phases as `user_annotation` ranges on the scheduler thread: `draft`,
`step[TARGET_VERIFY bs=N]`, `draft_extend`, inside one `scheduler.run_batch` per cycle (prefill batches hold
`step[EXTEND …]` and a prefill `draft_extend`; a plain server's decode is `step[DECODE bs=N]`). Those CPU ranges
end when the phase's work is *launched*: CUDA graphs replay asynchronously (the real H200 trace: verify's CPU
range 1.03 ms, its GPU work 1.83 ms). The profiler projects each range onto the GPU as a `gpu_user_annotation`
with the same `External id`, spanning the kernels launched inside it; when that projection is missing we
rebuild it from the kernels whose `correlation` matches a runtime launch (`cudaGraphLaunch`, …) inside the
range. A phase's time is that GPU span; the kernels' summed duration (`gpu_busy_ms`) says how busy it was. A host
stall does not lengthen the GPU span either: inside a range it keeps the range open after its GPU work ended
(`host_after_gpu_ms`), or, at the start of the phase's method, delays its first launch (`host_inside_ms`: a sync
and a ~3 ms sleep at the start of the draft method on the real H100); before a range it widens the un-annotated gap since the previous phase range of the cycle
closed (`host_before_ms`) — the real H200 trace of a sync + sleep patch in verify: that gap 5.63 ms against 1.21 ms on
the clean server, verify's GPU time, CPU range and time after its GPU work unchanged. A phase's host time is both.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from collections import defaultdict
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from .errors import ParseError
from .text import clean_text

__all__ = ["Phase", "PhaseRange", "CycleAccount", "SGLangTrace", "parse_sglang_trace", "PHASE_OF", "TRACE_NAME"]

Phase = Literal["draft", "verify", "draft_extend", "decode", "extend", "sample"]  # sample: vLLM's (vllm_trace)
#: A trace file as SGLang's profiler names it: `<prefix>-<time.time()>-TP-<rank>.trace.json.gz`.
TRACE_NAME = re.compile(r"^(?P<prefix>.*?)-?(?P<ts>\d+(?:\.\d+)?)-TP-(?P<rank>\d+)\.trace\.json(?:\.gz)?$")
_STEP = re.compile(r"^step\[(?P<mode>[A-Z_]+) bs=(?P<bs>\d+)(?: toks=\d+)?\]$")
_MODE_PHASE: dict[str, Phase] = {"TARGET_VERIFY": "verify", "DECODE": "decode", "EXTEND": "extend"}
#: The fixed range names SGLang gives its phases (the `step[…]` ranges are matched by `_STEP`).
PHASE_OF: dict[str, Phase] = {"draft": "draft", "draft_extend": "draft_extend"}
_CYCLE = "scheduler.run_batch"
_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


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
    cycle: int | None = Field(default=None, description="Index of the enclosing `scheduler.run_batch`.")
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


class SGLangTrace(BaseModel):
    """The phase ranges of one trace and what the trace carried to time them."""

    ranges: list[PhaseRange] = Field(default_factory=list)
    batch_starts_ms: list[float] = Field(default_factory=list, description="Each scheduler.run_batch's start and "
                                         "end (ms), in order.")
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


def _phase(name: str) -> tuple[Phase, int | None] | None:
    if name in PHASE_OF:
        return PHASE_OF[name], None
    m = _STEP.match(name)
    if m and m["mode"] in _MODE_PHASE:
        return _MODE_PHASE[m["mode"]], int(m["bs"])
    return None


def _load(data: bytes | str) -> dict[str, Any]:
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


def _num(e: dict[str, Any], key: str) -> float:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        raise ParseError(f"event {str(e.get('name'))[:60]!r} has no numeric {key!r}")
    return float(v)


def parse_sglang_trace(data: bytes | str) -> SGLangTrace:
    """Read a trace (gzip'd or plain JSON) into its phase ranges; `ParseError` on anything else."""
    try:
        return _parse(data)
    except ParseError:
        raise
    except (TypeError, KeyError, AttributeError, ValueError, OverflowError) as exc:
        raise ParseError(f"malformed trace event: {type(exc).__name__}: {str(exc)[:80]}") from None


class _TraceIndex(NamedTuple):
    """What timing a phase range looks up: GPU projections by External id, runtime launches in time order,
    GPU work by correlation id, and the `scheduler.run_batch` cycles in time order."""

    gua: dict[Any, dict[str, Any]]
    launches: list[tuple[float, dict[str, Any]]]
    launch_ts: list[float]
    gpu_by_corr: dict[Any, list[dict[str, Any]]]
    batches: list[tuple[float, float, Any]]


def _categories(events: list[dict[str, Any]]) -> dict[str, int]:
    cats: dict[str, int] = defaultdict(int)
    for e in events:
        cats[str(e.get("cat"))] += 1
    return cats


def _phase_annotations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CPU `user_annotation` ranges; `ParseError` when none of them is an SGLang phase."""
    cpu = [e for e in events if e.get("cat") == "user_annotation" and e.get("ph") == "X"]
    if not any(_phase(str(e.get("name"))) for e in cpu):
        raise ParseError("no SGLang phase ranges (draft, draft_extend, step[…]) in the trace")
    return cpu


def _index(events: list[dict[str, Any]], cpu: list[dict[str, Any]]) -> _TraceIndex:
    gua = {_ext(e): e for e in events if e.get("cat") == "gpu_user_annotation" and _ext(e) is not None}
    launches = sorted(((_num(e, "ts"), e) for e in events if e.get("cat") in _LAUNCH_CATS and e.get("ph") == "X"),
                      key=lambda p: p[0])
    launch_ts = [t for t, _ in launches]
    gpu_by_corr: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") in _GPU_CATS and isinstance(e.get("args"), dict):
            gpu_by_corr[e["args"].get("correlation")].append(e)
    batches = sorted(((_num(e, "ts"), _num(e, "ts") + _num(e, "dur"), e.get("tid")) for e in cpu
                      if e.get("name") == _CYCLE), key=lambda b: b[0])
    return _TraceIndex(gua, launches, launch_ts, gpu_by_corr, batches)


def _first_launch(e: dict[str, Any], ts: float, dur: float, idx: _TraceIndex) -> float | None:
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


def _launched_work(e: dict[str, Any], ts: float, dur: float, idx: _TraceIndex) -> list[dict[str, Any]]:
    """The GPU events launched, on the range's own thread, inside [ts, ts + dur]."""
    lo, hi = bisect.bisect_left(idx.launch_ts, ts), bisect.bisect_right(idx.launch_ts, ts + dur)
    return [k for _, r in idx.launches[lo:hi] if r.get("tid") == e.get("tid") and isinstance(r.get("args"), dict)
            for k in idx.gpu_by_corr.get(r["args"].get("correlation"), [])]


def _gpu_span(span: dict[str, Any] | None, work: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(start, end) in µs: the profiler's GPU projection, else first kernel start to last kernel end, else None."""
    if span is not None:
        return _num(span, "ts"), _num(span, "ts") + _num(span, "dur")
    if work:
        return min(_num(k, "ts") for k in work), max(_num(k, "ts") + _num(k, "dur") for k in work)
    return None


def _phase_range(e: dict[str, Any], hit: tuple[Phase, int | None], idx: _TraceIndex) -> PhaseRange:
    ts, dur = _num(e, "ts"), _num(e, "dur")
    work = _launched_work(e, ts, dur, idx)
    span = _gpu_span(idx.gua.get(_ext(e)), work)
    cycle = next((i for i, (b0, b1, tid) in enumerate(idx.batches) if b0 <= ts <= b1 and tid == e.get("tid")), None)
    first = _first_launch(e, ts, dur, idx) if span is not None else None
    return PhaseRange(host_inside_ms=None if first is None else max(first - ts, 0.0) / 1000.0,
                      gpu_start_ms=None if span is None else span[0] / 1000.0,
                      gpu_end_ms=None if span is None else span[1] / 1000.0,name=str(e["name"]), phase=hit[0], batch_size=hit[1], cpu_ms=dur / 1000.0,
                      gpu_ms=None if span is None else (span[1] - span[0]) / 1000.0,
                      host_after_gpu_ms=None if span is None else max(ts + dur - span[1], 0.0) / 1000.0,
                      gpu_busy_ms=sum(_num(k, "dur") for k in work) / 1000.0 if work else None,
                      kernels=len(work), cycle=cycle)


def _mark_decode_cycles(ranges: list[PhaseRange]) -> None:
    """A range is in a decode cycle when its run_batch holds a verify (outside any: when it is not an extend)."""
    verify_cycles = {r.cycle for r in ranges if r.phase == "verify"}
    for r in ranges:
        r.decode_cycle = r.cycle in verify_cycles if r.cycle is not None else r.phase != "extend"


def _process_name(events: list[dict[str, Any]]) -> str | None:
    return next((str((e.get("args") or {}).get("name")) for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name" and isinstance(e.get("args"), dict)), None)


def _parse(data: bytes | str) -> SGLangTrace:
    events = [e for e in _load(data)["traceEvents"] if isinstance(e, dict)]
    cats = _categories(events)
    cpu = _phase_annotations(events)
    idx = _index(events, cpu)
    ranges: list[PhaseRange] = []
    closed: dict[tuple[int, Any], float] = {}  # (cycle, thread) -> when its last phase range closed (µs)
    for e in sorted(cpu, key=lambda x: _num(x, "ts")):
        hit = _phase(str(e.get("name")))
        if hit is not None:
            r = _phase_range(e, hit, idx)
            if r.cycle is not None and r.gpu_ms is not None:
                key, ts = (r.cycle, e.get("tid")), _num(e, "ts")
                r.host_before_ms = max(ts - closed.get(key, idx.batches[r.cycle][0]), 0.0) / 1000.0
                closed[key] = max(closed.get(key, 0.0), ts + _num(e, "dur"))
            ranges.append(r)
    _mark_decode_cycles(ranges)
    return SGLangTrace(ranges=ranges, events=len(events), categories=dict(cats), gpu_annotations=bool(idx.gua),
                       process_name=_process_name(events), batch_starts_ms=[b[0] / 1000.0 for b in idx.batches],
                       batch_ends_ms=[b[1] / 1000.0 for b in idx.batches])


def _ext(e: dict[str, Any]) -> Any:
    args = e.get("args")
    return args.get("External id") if isinstance(args, dict) else None
