"""Draft, verify and draft-extend milliseconds per cycle, measured by the engine's own profiler on a running server.

Sources, in the order tried: (1) the engine's torch profiler (SGLang: `/start_profile` with `num_steps`; vLLM:
`/start_profile` when launched with `--profiler-config`; read-only: the server keeps serving, each profiled cycle
pays some CPU overhead; what is engine-specific is its `profiler_plan`), its trace timed by GPU work when it carries
GPU events; (2) the same trace's CPU ranges when it carries none (labelled: launch time, not phase time);
(3) where no trace comes, the cycle from `meta_info` (`spec_verify_ct`, latencies) — total only, labelled
derived. Profiled and unprofiled samples are never mixed: the tok/s measured while profiling only gives the
profiler's overhead. Plain decode comes from baseline tok/s when given (derived: the spec server runs no
plain decode).
"""

from __future__ import annotations

import re
import statistics
import time
import zlib

import httpx
from pydantic import BaseModel, Field

from specdoctor.errors import NoData
from specdoctor.host import http
from specdoctor.inference.profiling import ProfilerPlan
from specdoctor.models.phases import PhaseStat, PhaseTimes, ProfilerOverhead
from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.torch_trace import Phase, PhaseTrace
from specdoctor.stats.phases import phase_stat
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.serving.measure import BenchmarkInput, BenchmarkResult, benchmark
from specdoctor.tools.serving.server import locate_servers, read_environs

__all__ = ["PhaseStat", "PhaseTimes", "PhaseTimesInput", "ProfilerOverhead", "phase_stat", "phase_times",
           "phases_from_trace"]


def phases_from_trace(trace: PhaseTrace, steps: int | None, path: str = "") -> PhaseTimes:
    """A parsed trace → PhaseTimes (one sample per cycle; draft per step divides the cycle's draft range by k)."""
    gpu = trace.time_basis == "gpu"
    basis = "GPU time" if gpu else "CPU range (launch time only: graphs replay after it closes)"
    names = {r.phase: r.name for r in trace.ranges}

    def stat(phase: Phase, scale: float = 1.0) -> PhaseStat | None:
        return phase_stat([s / scale for s in trace.samples(phase)], f"profiler trace, {basis} of "
                          f"{names.get(phase, phase)}" + (f" / k={int(scale)}" if scale != 1.0 else ""),
                          [s / scale for s in trace.cpu_samples(phase)], [s / scale for s in trace.host_samples(phase)])

    out = PhaseTimes(source="profiler-gpu" if gpu else "profiler-cpu", steps=steps, trace_path=path or None,
                     cycles=trace.cycles(), draft_cycle_ms=stat("draft"), verify_ms=stat("verify"),
                     draft_extend_ms=stat("draft_extend"), decode_ms=stat("decode"),
                     sample_ms=stat("sample"))
    if steps:
        out.draft_ms = stat("draft", float(steps))
    cyc = [sum(r.ms for r in trace.ranges if r.cycle == c and r.decode_cycle)
           for c in sorted({r.cycle for r in trace.ranges if r.decode_cycle and r.cycle is not None})]
    out.cycle_ms = phase_stat(cyc, f"profiler trace, {basis}: draft + verify + draft-extend per run_batch")
    acc = trace.accounts() if gpu else []
    if acc:
        out.wall_ms = phase_stat([a.wall_ms for a in acc], "profiler trace: a decode run_batch's start to the next's")
        out.rest_ms = phase_stat([a.rest_ms for a in acc], "profiler trace: after the last phase's GPU work")
        for ph in sorted({p for a in acc for p in a.idle_before_ms}):
            st = phase_stat([a.idle_before_ms.get(ph, 0.0) for a in acc], f"profiler trace: GPU idle before {ph}")
            if st is not None:
                out.idle_before_ms[ph] = st
    if not gpu:
        out.notes.append("the trace has no GPU events: phase times are CPU launch times, a lower bound")
    return out


class PhaseTimesInput(BaseModel):
    """Arguments of phase_times."""

    port: int = Field(description="Port of the running server to profile.")
    runs: int = Field(default=3, ge=1, le=20, description="Benchmark runs with the profiler on (and as many "
                      "without, for its overhead).")
    requests_per_run: int = Field(default=2, ge=1, le=20)
    max_new_tokens: int = Field(default=128, ge=8, le=4096)
    baseline_tps: list[float] = Field(default_factory=list, description="Plain-decode tok/s samples, for a derived "
                                      "decode step when the server is speculative (it runs no plain decode).")
    timeout_s: float = Field(default=180.0, gt=0, description="Seconds to wait for the trace file.")
    label: str = "phases"


def _list(ctx: ToolContext, folder: str, name: re.Pattern[str]) -> set[str]:
    res = ctx.host.run(["ls", "-1", folder], check="ignore")
    return {n for n in res.stdout.split() if name.match(n)} if res.ok else set()


def _pick(new: set[str], plan: ProfilerPlan) -> str:
    """The trace to read: the plan's rank's newest (by the name's time stamp), else the last name sorted."""
    if plan.rank is not None:
        mine = [(int(m["ts"]), n) for n in new if (m := plan.trace_name.match(n)) and m["rank"] == plan.rank]
        if mine:
            return max(mine)[1]
    return sorted(new)[-1]


def _post(port_url: str, path: str, body: dict | None, timeout: float = 60.0) -> tuple[int, str]:
    try:
        r = http.post(port_url + path, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return 0, f"{type(exc).__name__}: {exc}"
    return r.status_code, r.text.strip()


def _gzip_complete(data: bytes) -> bool:
    """Whether a gzip stream reaches its end-of-stream marker (a file still being written does not)."""
    d = zlib.decompressobj(wbits=31)
    try:
        while not d.eof:
            out = d.decompress(data, 1 << 20)  # bounded: a whole trace decompressed is hundreds of MB
            data = d.unconsumed_tail
            if not data and not out:
                break
    except zlib.error:
        return True  # not gzip, or corrupt: the parser says which, in one line
    return d.eof


def _finished_trace(ctx: ToolContext, path: str, deadline: float, wait_s: float) -> bytes:
    """The trace's bytes once the server has finished writing it: torch's export streams into the final name, so a
    file that has appeared may be half written (on the real 0.5.17 a reader got a truncated gzip); read it again
    until its stream is whole, within the wait."""
    while True:
        data = ctx.host.read(path)
        if not path.endswith(".gz") or _gzip_complete(data):
            return data
        if time.monotonic() >= deadline:
            raise NoData(f"{path}: still being written after {wait_s:g} s ({len(data)} bytes, no end of stream)")
        time.sleep(1.0)


@tool(effect="read")
def phase_times(ctx: ToolContext, args: PhaseTimesInput) -> PhaseTimes:
    """Draft / verify / draft-extend (vLLM: sample) ms per cycle from the engine's own profiler on the running server
    (no restart).

    Calls `/start_profile` as the engine's `profiler_plan` says (SGLang: `num_steps`, the trace into the server's
    SGLANG_TORCH_PROFILER_DIR or this run's folder; vLLM: its `--profiler-config` torch_profiler_dir, no_data when
    it was launched without one), sends benchmark requests, reads the newest trace and times each phase by the GPU
    work its range launched. Costs about `runs` benchmark runs twice (with and without the profiler) plus writing the trace.
    """
    server = locate_servers(ctx.host, args.port, exactly_one=True).servers[0]
    steps = server.args.get("speculative_num_steps") if isinstance(server.args, dict) else None
    env = read_environs(ctx.host, [server.main.pid]).get(server.main.pid) or {}
    # num_steps (where the engine takes one) bounds the session so the server ends it even if we cannot; we stop it
    # right after the profiled runs, so every profiled sample is a profiled cycle and no other.
    plan = ctx.engine.profiler_plan(server.args if isinstance(server.args, dict) else {}, env,
                                    f"{ctx.run_dir}/profile",
                                    args.runs * args.requests_per_run * args.max_new_tokens + 8)
    if plan.missing or plan.parse is None:
        raise NoData(plan.missing or f"{ctx.engine.name}: no profiler trace reader")
    folder, notes = plan.folder, list(plan.notes)
    if plan.make_folder:
        ctx.host.run(["mkdir", "-p", folder])
    bench = BenchmarkInput(port=args.port, runs=args.runs, requests_per_run=args.requests_per_run,
                           max_new_tokens=args.max_new_tokens, warmup_runs=0, label=f"{args.label} unprofiled")
    plain: BenchmarkResult = benchmark(ctx, bench)
    before = _list(ctx, folder, plan.trace_name)
    with ctx.host.forward(args.port) as local:
        url = f"http://127.0.0.1:{local}"
        code, text = _post(url, "/start_profile", plan.start_body)
        if code != 200:
            raise NoData(f"/start_profile answered {code or 'nothing'}: {text[:200]}")
        profiled = benchmark(ctx, bench.model_copy(update={"label": f"{args.label} profiled"}))
        deadline = time.monotonic() + args.timeout_s
        # /stop_profile answers once the trace is written; half the wait for it, the rest to find the file whole
        code, text = _post(url, "/stop_profile", None, timeout=args.timeout_s / 2)
        if code != 200:
            notes.append(f"/stop_profile answered {code or 'nothing'}: {text[:120]} (the session had ended)")
        new: set[str] = set()
        while time.monotonic() < deadline:
            new = _list(ctx, folder, plan.trace_name) - before
            if new:
                break
            time.sleep(0.5)
    if not new:
        raise NoData(f"no trace appeared in {folder} within {args.timeout_s:g} s")
    path = f"{folder}/{_pick(new, plan)}"
    try:
        trace = plan.parse(_finished_trace(ctx, path, deadline, args.timeout_s))
    except ParseError as exc:
        raise NoData(f"{path}: {exc}") from None
    out = phases_from_trace(trace, int(steps) if steps else None, path)
    out.phases = list(ctx.engine.phases)  # what a cycle line shows: never a phase this engine does not have
    out.notes = notes + out.notes
    out.measured_on = (f"{args.label}: the server on :{args.port}, {args.runs} profiled runs of "
                       f"{args.requests_per_run} requests x {args.max_new_tokens} tokens ({out.cycles} cycles)")
    out.overhead = ProfilerOverhead(tps_without=round(plain.median, 3), tps_with=round(profiled.median, 3))
    tps = statistics.median(profiled.decode_samples) if profiled.decode_samples else profiled.median
    if profiled.accept_length and tps:  # the profiled runs' own cycle, from outside the trace
        out.measured_cycle_ms = round(1000.0 * profiled.accept_length / tps, 4)
    if out.decode_ms is None and args.baseline_tps:
        out.decode_ms = phase_stat([1000.0 / t for t in args.baseline_tps],
                                   "derived: 1000 / baseline tok/s (batch 1; the spec server runs no plain decode)")
    return out
