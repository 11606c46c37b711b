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

import re
from collections.abc import Callable
from typing import Any

from .errors import ParseError
from .torch_trace import CycleAccount, Phase, PhaseRange, PhaseTrace, cycle_finder, guard_parse, index_trace
from .torch_trace import TraceIndex as _TraceIndex
from .torch_trace import categories as _categories
from .torch_trace import external_id as _ext
from .torch_trace import first_launch as _first_launch
from .torch_trace import gpu_span as _gpu_span
from .torch_trace import launched_work as _launched_work
from .torch_trace import load_trace as _load
from .torch_trace import num_field as _num
from .torch_trace import process_name as _process_name

__all__ = ["Phase", "PhaseRange", "CycleAccount", "SGLangTrace", "parse_sglang_trace", "PHASE_OF", "TRACE_NAME"]

#: A trace file as SGLang's profiler names it: `<prefix>-<time.time()>-TP-<rank>.trace.json.gz`.
TRACE_NAME = re.compile(r"^(?P<prefix>.*?)-?(?P<ts>\d+(?:\.\d+)?)-TP-(?P<rank>\d+)\.trace\.json(?:\.gz)?$")
_STEP = re.compile(r"^step\[(?P<mode>[A-Z_]+) bs=(?P<bs>\d+)(?: toks=\d+)?\]$")
_MODE_PHASE: dict[str, Phase] = {"TARGET_VERIFY": "verify", "DECODE": "decode", "EXTEND": "extend"}
#: The fixed range names SGLang gives its phases (the `step[…]` ranges are matched by `_STEP`).
PHASE_OF: dict[str, Phase] = {"draft": "draft", "draft_extend": "draft_extend"}
_CYCLE = "scheduler.run_batch"


class SGLangTrace(PhaseTrace):
    """The phase ranges of one SGLang trace; its cycles are the `scheduler.run_batch` ranges."""


def _phase(name: str) -> tuple[Phase, int | None] | None:
    if name in PHASE_OF:
        return PHASE_OF[name], None
    m = _STEP.match(name)
    if m and m["mode"] in _MODE_PHASE:
        return _MODE_PHASE[m["mode"]], int(m["bs"])
    return None


def parse_sglang_trace(data: bytes | str) -> SGLangTrace:
    """Read a trace (gzip'd or plain JSON) into its phase ranges; `ParseError` on anything else."""
    return guard_parse(_parse, data)


def _phase_annotations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CPU `user_annotation` ranges; `ParseError` when none of them is an SGLang phase."""
    cpu = [e for e in events if e.get("cat") == "user_annotation" and e.get("ph") == "X"]
    if not any(_phase(str(e.get("name"))) for e in cpu):
        raise ParseError("no SGLang phase ranges (draft, draft_extend, step[…]) in the trace")
    return cpu


def _index(events: list[dict[str, Any]], cpu: list[dict[str, Any]]) -> _TraceIndex:
    batches = [(_num(e, "ts"), _num(e, "ts") + _num(e, "dur"), e.get("tid")) for e in cpu if e.get("name") == _CYCLE]
    return index_trace(events, batches)


def _phase_range(e: dict[str, Any], hit: tuple[Phase, int | None], idx: _TraceIndex,
                 cycle_of: Callable[[float, Any], int | None]) -> PhaseRange:
    ts, dur = _num(e, "ts"), _num(e, "dur")
    work = _launched_work(e, ts, dur, idx)
    span = _gpu_span(idx.gua.get(_ext(e)), work)
    cycle = cycle_of(ts, e.get("tid"))
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


def _parse(data: bytes | str) -> SGLangTrace:
    events = [e for e in _load(data)["traceEvents"] if isinstance(e, dict)]
    cats = _categories(events)
    cpu = _phase_annotations(events)
    idx = _index(events, cpu)
    cycle_of = cycle_finder(idx.batches)
    ranges: list[PhaseRange] = []
    closed: dict[tuple[int, Any], float] = {}  # (cycle, thread) -> when its last phase range closed (µs)
    for e in sorted(cpu, key=lambda x: _num(x, "ts")):
        hit = _phase(str(e.get("name")))
        if hit is not None:
            r = _phase_range(e, hit, idx, cycle_of)
            if r.cycle is not None and r.gpu_ms is not None:
                key, ts = (r.cycle, e.get("tid")), _num(e, "ts")
                r.host_before_ms = max(ts - closed.get(key, idx.batches[r.cycle][0]), 0.0) / 1000.0
                closed[key] = max(closed.get(key, 0.0), ts + _num(e, "dur"))
            ranges.append(r)
    _mark_decode_cycles(ranges)
    return SGLangTrace(ranges=ranges, events=len(events), categories=dict(cats), gpu_annotations=bool(idx.gua),
                       process_name=_process_name(events), batch_starts_ms=[b[0] / 1000.0 for b in idx.batches],
                       batch_ends_ms=[b[1] / 1000.0 for b in idx.batches])
