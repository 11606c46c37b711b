"""The vLLM 0.26.0 phase reader on real H100 traces (2026-12-06 first contact: CUDA graphs, model runner v2, EAGLE-3
k=3, batch 1), cut to their first 16 decode steps by benchmarks/real_vllm/cut_trace.py.

The "draftsync" server carried a sync + 1 ms sleep in `v1/spec_decode/llm_base_proposer.py`'s propose loop, but the
server ran model runner v2 ("Using V2 Model Runner" in its log), whose drafter is
`v1/worker/gpu/spec_decode/autoregressive/speculator.py`: the patched file never ran (its trace has no frame of it,
no added `cudaDeviceSynchronize`, its cycle 4.96 ms against 4.77 ms clean). So that real pair is a must-not-fire,
and the stall the reader must name is planted into the clean real trace here: host time inserted on the engine's
thread (every later CPU event and the GPU work it launches move later; work launched before keeps its time), as a
sync + sleep in the drafter's loop would.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.vllm_trace import RANK_TRACE, VLLMTrace, parse_vllm_trace
from specdoctor.stats.phases import phase_effect
from specdoctor.tools.serving.phase_times import phases_from_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.26-h100" / "trace"
K = 3


def _read(name: str) -> VLLMTrace:
    return parse_vllm_trace((TRACES / f"{name}.json.gz").read_bytes())


def _events(name: str) -> list[dict[str, Any]]:
    return json.loads(gzip.decompress((TRACES / f"{name}.json.gz").read_bytes()))["traceEvents"]


def _stall(events: list[dict[str, Any]], frame: str, where: float, ms: float) -> bytes:
    """The trace with `ms` of host time inserted in every `frame` python frame, `where` (0..1) into it."""
    cpu = [e for e in events if e.get("cat") in ("python_function", "cuda_runtime", "cuda_driver")]
    at = sorted(e["ts"] + where * e["dur"] for e in cpu if e.get("cat") == "python_function"
                and e["name"].endswith(frame))
    d = ms * 1000.0
    corr_shift: dict[Any, float] = {}
    out = []
    for e in events:
        e = dict(e)
        if e.get("cat") in ("python_function", "cuda_runtime", "cuda_driver"):
            ts, end = e["ts"], e["ts"] + e.get("dur", 0.0)
            before = sum(d for t in at if t <= ts)
            inside = sum(d for t in at if ts < t < end)
            e["ts"], e["dur"] = ts + before, e.get("dur", 0.0) + inside
            if "args" in e:
                corr_shift[e["args"]["correlation"]] = before
        out.append(e)
    for e in out:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            e["ts"] += corr_shift.get(e["args"]["correlation"], 0.0)
    return json.dumps({"traceEvents": out}).encode()


def _half(trace: VLLMTrace, first: bool) -> VLLMTrace:
    cycles = sorted({r.cycle for r in trace.ranges if r.decode_cycle})
    keep = set(cycles[: len(cycles) // 2] if first else cycles[len(cycles) // 2:])
    return trace.model_copy(update={"ranges": [r for r in trace.ranges if r.cycle in keep]})


def test_the_clean_trace_gives_draft_verify_and_sample_per_decode_step_adding_up_to_the_cycle():
    t = _read("clean")
    assert t.time_basis == "gpu" and t.cycles() == 16
    for ph in ("draft", "verify", "sample"):
        assert len(t.samples(ph)) == 16 and all(s > 0 for s in t.samples(ph))
    pt = phases_from_trace(t, K)
    assert pt.verify_ms is not None and pt.draft_cycle_ms is not None and pt.sample_ms is not None
    # real H100: verify (k+1 tokens through the target graph) ~2.0 ms, the whole draft ~1.1 ms, sampling ~0.15 ms
    assert 1.5 < pt.verify_ms.ms < 3.0 and 0.7 < pt.draft_cycle_ms.ms < 1.5 and pt.sample_ms.ms < pt.draft_cycle_ms.ms
    accounts = t.accounts()
    assert len(accounts) == 16
    for a in accounts:
        parts = sum(a.gpu_ms.values()) + sum(a.idle_before_ms.values()) + a.rest_ms
        assert parts == pytest.approx(a.wall_ms, abs=1e-6)
        assert set(a.gpu_ms) == {"verify", "sample", "draft"}
    assert pt.wall_ms is not None and 4.0 < pt.wall_ms.ms < 6.0


def test_a_host_stall_in_the_drafter_is_named_draft_wherever_in_its_method_it_sits():
    """3 x (sync + 1 ms) a cycle in the drafter: at its start the GPU span keeps its length (host time before the first
    launch), in its middle the span stretches over the gap; either way the draft is the phase named, ~+3 ms a cycle."""
    clean = phases_from_trace(_read("clean"), K)
    for where in (0.0, 0.5):
        slow = phases_from_trace(parse_vllm_trace(_stall(_events("clean"), "): propose", where, 3.0)), K)
        effect = phase_effect(slow, clean)
        assert effect is not None and effect.phase == "draft", where
        assert 2.5 < effect.delta_ms * (K if effect.per == "step" else 1) < 3.5, where


def test_a_host_stall_before_the_target_forward_is_named_verify_not_draft():
    clean = phases_from_trace(_read("clean"), K)
    slow = phases_from_trace(parse_vllm_trace(_stall(_events("clean"), "): execute_model", 0.0, 3.0)), K)
    effect = phase_effect(slow, clean)
    assert effect is not None and effect.phase == "verify"


def test_clean_against_clean_names_no_phase():
    t = _read("clean")
    first, second = phases_from_trace(_half(t, True), K), phases_from_trace(_half(t, False), K)
    assert phase_effect(first, second) is None and phase_effect(second, first) is None


def test_the_real_draftsync_server_whose_patch_never_ran_names_no_phase():
    """Its patch sat in the v1 runner's proposer, off model runner v2's path: no stall in the trace, none named."""
    events, trace = _events("draftsync"), _read("draftsync")
    assert trace.model_runner == "v2" and "vllm/v1/spec_decode/llm_base_proposer.py" not in trace.ran_files
    assert "vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py" in trace.ran_files
    assert sum(e.get("name") == "cudaDeviceSynchronize" for e in events) == 0
    clean, sync = phases_from_trace(_read("clean"), K), phases_from_trace(_read("draftsync"), K)
    assert phase_effect(sync, clean) is None


def test_enforce_eager_slows_every_phase_and_the_target_forward_most():
    """--enforce-eager (no graphs, no compile): every phase ~10x slower; the verify's GPU time carries the most of
    the cycle's growth (+33 ms of +48 ms), so verify is named — a launch-flag story, not a draft one."""
    clean, eager = phases_from_trace(_read("clean"), K), phases_from_trace(_read("eager"), K)
    assert eager.verify_ms and clean.verify_ms and eager.verify_ms.ms > 10 * clean.verify_ms.ms
    assert eager.draft_cycle_ms and clean.draft_cycle_ms and eager.draft_cycle_ms.ms > 5 * clean.draft_cycle_ms.ms
    effect = phase_effect(eager, clean)
    assert effect is not None and effect.phase == "verify" and effect.basis == "gpu"


def test_rank_trace_names_and_what_is_not_a_vllm_phase_trace():
    assert RANK_TRACE.match("rank0.1796577052269873383.pt.trace.json.gz")
    assert not RANK_TRACE.match("vm_1906.async_llm.1796577052114835927.pt.trace.json.gz")
    with pytest.raises(ParseError, match="with_stack"):
        parse_vllm_trace(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1}]}))
    with pytest.raises(ParseError, match="phase frames"):
        parse_vllm_trace(json.dumps({"traceEvents": [{"ph": "X", "cat": "python_function", "name": "f.py(1): g",
                                                      "ts": 0, "dur": 1}]}))


def test_a_worker_trace_without_the_engine_step_frames_gives_the_same_phases():
    """At TP > 1 the model runs in the workers, whose rank traces lack the engine core's step frame: cycles are then
    cut at each target forward, and the phases' GPU and CPU times are the same (only the host time before verify,
    measured from the step's start, is lost)."""
    events = [e for e in _events("clean") if "engine/core.py" not in str(e.get("name"))]
    worker = parse_vllm_trace(json.dumps({"traceEvents": events}))
    clean = _read("clean")
    assert worker.cycles() == clean.cycles() == 16
    for ph in ("draft", "verify", "sample"):
        assert worker.samples(ph) == clean.samples(ph) and worker.cpu_samples(ph) == clean.cpu_samples(ph)
    assert phases_from_trace(worker, K).draft_cycle_ms is not None
