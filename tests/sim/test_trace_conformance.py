"""The twin's profiler trace has the real 0.5.17 trace's names, categories and structure, as the parser reads them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.parsers.sglang_trace import TRACE_NAME, parse_sglang_trace
from specdoctor.sim.standin.sglang._twin import profiler

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h200" / "trace" / \
    "spec-1796176826.4640355-TP-0.trace.json.gz"
STALLED = REAL.parent / "stalled-1796415895.358067-TP-0.trace.json.gz"  # the real code-regression server
PERF = {"speculative": True, "k": 3, "t_draft_ms": 0.6, "t_verify_ms": 1.8}


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    state: dict = {"engine": SimpleNamespace(perf=PERF, running=1)}
    code, text = profiler.start_profile(state, {"output_dir": str(out), "profile_prefix": "spec", "num_steps": 12,
                                                "activities": ["CPU", "GPU"]})
    assert (code, text) == (200, "Start profiling.\n")
    for _ in range(12):
        profiler.Profiler.on_step(state["profiler"], state, 3 * 0.6 + 1.8)
    assert state["profiler"] is None  # num_steps ended the session
    assert profiler.stop_profile(state)[0] == 400
    (path,) = out.iterdir()
    return path


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _shape(path: Path) -> dict:
    ev = _events(path)
    ua = [e for e in ev if e.get("cat") == "user_annotation"]
    spec = {"draft", "draft_extend", "step[TARGET_VERIFY bs=1]", "scheduler.run_batch"}
    return {"cats": {e.get("cat") for e in ev} & {"user_annotation", "gpu_user_annotation", "cuda_runtime", "kernel",
                                                   "ac2g", None},
            "names": {e["name"] for e in ua} & spec,
            "gpu_names": {e["name"] for e in ev if e.get("cat") == "gpu_user_annotation"} & spec,
            "ua_args": set.intersection(*(set(e["args"]) for e in ua)),
            "kernel_args": {"correlation"} & set.intersection(*(set(e["args"]) for e in ev if e.get("cat") == "kernel")),
            "launch": {e["name"] for e in ev if e.get("cat") == "cuda_runtime"} & {"cudaGraphLaunch"},
            "flows": {e["ph"] for e in ev if e.get("cat") == "ac2g"},
            "process": {e["args"]["name"] for e in ev if e.get("name") == "process_name"}}


def test_twin_trace_has_the_real_traces_shape(twin):
    assert _shape(twin) == _shape(REAL)
    assert TRACE_NAME.match(twin.name)["prefix"] == TRACE_NAME.match(REAL.name)["prefix"] == "spec"  # type: ignore[index]


def test_both_parse_alike_and_the_twin_holds_the_scenarios_phases(twin):
    real, sim = parse_sglang_trace(REAL.read_bytes()), parse_sglang_trace(twin.read_bytes())
    for t in (real, sim):
        assert t.time_basis == "gpu" and t.gpu_annotations and t.cycles() == 12
        assert [r.phase for r in t.ranges if r.decode_cycle][:3] == ["draft", "verify", "draft_extend"]
        assert all(r.cpu_ms < r.ms for r in t.ranges if r.phase == "verify")  # graph replays after the range
    assert sim.samples("verify") == pytest.approx([1.8] * 12) and sim.samples("draft") == pytest.approx([1.8] * 12)


def _twin_trace(tmp_path: Path, perf: dict) -> Path:
    tmp_path.mkdir()
    state: dict = {"engine": SimpleNamespace(perf=perf, running=1)}
    profiler.start_profile(state, {"output_dir": str(tmp_path), "num_steps": 12, "activities": ["CPU", "GPU"]})
    step = perf["k"] * perf["t_draft_ms"] + perf["t_verify_ms"]
    for _ in range(12):
        profiler.Profiler.on_step(state["profiler"], state, step)
    (path,) = tmp_path.iterdir()
    return path


def test_host_time_reads_alike_and_a_host_stall_before_verify_shows_only_in_the_gap_before_its_range(tmp_path):
    """The real H200 trace: verify's range closes before its graph has run (nothing after its GPU work), the host
    works between the draft's range and verify's (the gap before it). The real stalled-verify run (a sync + sleep
    patched in before verify's forward) widened only that gap (5.63 vs 1.21 ms), verify's GPU time and CPU range as
    they were: the twin's stalled verify does the same, and the parser's host time holds the stall."""
    real = parse_sglang_trace(REAL.read_bytes())
    verify = [r for r in real.ranges if r.phase == "verify"]
    assert [r.host_after_gpu_ms for r in verify] == [0.0] * 12
    assert all(0.5 < (r.host_before_ms or 0) < 5 for r in verify)  # scheduler work between draft and verify
    assert all(0 < h < 5 for h in real.host_samples("draft"))
    clean = parse_sglang_trace(_twin_trace(tmp_path / "clean", PERF).read_bytes())
    assert [r.host_after_gpu_ms for r in clean.ranges if r.phase == "verify"] == [0.0] * 12
    assert all(0 < h < 1 for h in clean.host_samples("verify"))
    stalled_perf = {**PERF, "t_verify_ms": 1.8 + 4.0, "t_verify_host_ms": 4.0}  # as the twin's perf model gives it
    stalled = parse_sglang_trace(_twin_trace(tmp_path / "stalled", stalled_perf).read_bytes())
    assert stalled.samples("verify") == pytest.approx(clean.samples("verify"))  # the GPU work is unchanged
    assert stalled.cpu_samples("verify") == pytest.approx(clean.cpu_samples("verify"))  # so is verify's range
    assert [r.host_after_gpu_ms for r in stalled.ranges if r.phase == "verify"] == [0.0] * 12
    grown = [s - c for s, c in zip(stalled.host_samples("verify"), clean.host_samples("verify"), strict=True)]
    assert grown == pytest.approx([4.0] * 12, abs=0.01)  # the stall, all of it in the gap before verify
    assert stalled.host_samples("draft") == clean.host_samples("draft")
    assert stalled.host_samples("draft_extend") == pytest.approx(clean.host_samples("draft_extend"))


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def test_the_real_stalled_verify_holds_its_stall_in_the_gap_before_verify_and_the_twin_puts_it_there_too(tmp_path):
    """The real server with a sync + 4 ms sleep before every verify's forward against the real clean one: verify's
    GPU work and CPU range are a clean verify's, nothing is left open after its GPU work, the gap before its range
    holds the stall; the other phases' host time is not larger. The twin's stalled verify reads the same way."""
    real, stalled = parse_sglang_trace(REAL.read_bytes()), parse_sglang_trace(STALLED.read_bytes())
    assert stalled.time_basis == "gpu" and stalled.cycles() == 12
    assert _median(stalled.samples("verify")) < 1.5 * _median(real.samples("verify"))  # not +4 ms of GPU time
    assert _median(stalled.cpu_samples("verify")) < _median(stalled.samples("verify"))  # the graph replays after
    verify = [r for r in stalled.ranges if r.phase == "verify"]
    assert [r.host_after_gpu_ms for r in verify] == [0.0] * 12
    gap = _median(stalled.host_samples("verify")) - _median(real.host_samples("verify"))
    assert gap > 2.5, gap  # the 4 ms sleep (the clean trace's gap has Python stacks on: ~1 ms more overhead)
    for phase in ("draft", "draft_extend"):
        assert _median(stalled.host_samples(phase)) <= _median(real.host_samples(phase))
    twin_clean = parse_sglang_trace(_twin_trace(tmp_path / "clean", PERF).read_bytes())
    twin = parse_sglang_trace(_twin_trace(tmp_path / "stalled", {**PERF, "t_verify_ms": 1.8 + 4.0,
                                                                "t_verify_host_ms": 4.0}).read_bytes())
    for t, clean in ((stalled, real), (twin, twin_clean)):  # the same reading, real and twin
        host = {ph: _median(t.host_samples(ph)) - _median(clean.host_samples(ph)) for ph in ("draft", "verify")}
        assert max(host, key=lambda ph: host[ph]) == "verify"
        assert _median(t.samples("verify")) < 1.5 * _median(clean.samples("verify"))


def test_a_stall_at_the_start_of_the_draft_method_is_the_drafts_host_time_not_any_gpu_phases(tmp_path):
    """A sync + sleep at the start of the draft method (the real H100 story, ~3 ms): the draft's range opens, the
    host waits, then launches. No GPU span moves; the time inside the range before its first launch holds the
    stall, and the parser counts it as the draft's host time (before: invisible, and draft-extend was named)."""
    clean = parse_sglang_trace(_twin_trace(tmp_path / "clean", PERF).read_bytes())
    stalled_perf = {**PERF, "t_verify_ms": 1.8 + 3.0, "t_draft_host_ms": 3.0}  # as the twin's perf model gives it
    stalled = parse_sglang_trace(_twin_trace(tmp_path / "stalled", stalled_perf).read_bytes())
    for phase in ("draft", "verify", "draft_extend"):
        assert stalled.samples(phase) == pytest.approx(clean.samples(phase))  # no GPU work moved
    grown = [s - c for s, c in zip(stalled.host_samples("draft"), clean.host_samples("draft"), strict=True)]
    assert grown == pytest.approx([3.0] * 12, abs=0.01)
    assert [r.host_inside_ms for r in stalled.ranges if r.phase == "draft"] == pytest.approx([3.0] * 12, abs=0.01)
    assert stalled.host_samples("verify") == pytest.approx(clean.host_samples("verify"))
