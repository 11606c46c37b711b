"""The twin's vLLM profiler held to the real 0.26.0 trace, and phase_times end to end on a vLLM box.

The twin's rank trace must carry what the reader keys on in the real one (tests/fixtures/vllm-0.26-h100/trace): the
same Python frames (file and function; line numbers may drift), the CUDA runtime launches and correlated kernels, the
rank-file name beside the API server's own trace; and its phase times must be the scenario's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.models.phases import PhaseTimes
from specdoctor.parsers.vllm_trace import FRAME_PHASE, RANK_TRACE, parse_vllm_trace
from specdoctor.sim import open_sim_host
from specdoctor.sim.predict import predict
from specdoctor.stats.phases import cycle_account_line
from specdoctor.toolkit import ToolContext, registry

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.26-h100" / "trace" / "clean.json.gz"
_KEY = re.compile(r"vllm/v1/(?P<file>[\w/]+\.py)\(\d+\): (?P<fn>\w+)$")


def _scenario(tmp_path: Path, base: str, profiler: str | None) -> str:
    prof = f" --profiler-config '{profiler}'" if profiler else ""
    path = tmp_path / f"{base}-profiled.yaml"
    path.write_text(f"""extends: {base}
name: {base}-profiled
corpus: false
server:
  launch: >-
    vllm serve {{models}}/Llama-3.1-8B-Instruct
    --speculative-config '{{"method": "eagle3", "model": "{{models}}/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}}'
    --attention-backend TRITON_ATTN --gpu-memory-utilization 0.85 --host 127.0.0.1 --port {{port}}{prof}
""")
    return str(path)


def _keys(trace_events: list[dict]) -> set[tuple[str, str]]:
    """(file, function) of every frame the reader keys on."""
    out = set()
    for e in trace_events:
        m = _KEY.search(str(e.get("name"))) if e.get("cat") == "python_function" else None
        if m and any(p.search(e["name"]) for p, _ in FRAME_PHASE):
            out.add((m["file"], m["fn"]))
    return out


def test_phase_times_on_a_profiled_vllm_twin_reads_its_rank_trace_like_the_real_one(tmp_path):
    import gzip
    import json

    prof_dir = tmp_path / "prof"
    cfg = '{"profiler": "torch", "torch_profiler_dir": "' + str(prof_dir) + '"}'
    with open_sim_host(_scenario(tmp_path, "vllm-draft-sync", cfg)) as host:
        ctx = ToolContext(host=host, run_id="sim-vllm-phases")
        assert ctx.engine.name == "vllm"
        port = ctx.engine.parse_launch(host.hints.launch).port
        res = registry.call(ctx, "phase_times", {"port": port, "runs": 2, "requests_per_run": 2,
                                                 "max_new_tokens": 48})
        assert res.ok, res.summary
        out = res.output
        truth = predict(host.sandbox)  # type: ignore[attr-defined]
    assert out["source"] == "profiler-gpu" and out["steps"] == 3 and out["cycles"] >= 20
    assert RANK_TRACE.match(Path(out["trace_path"]).name)
    names = sorted(p.name for p in prof_dir.iterdir())
    assert any(".async_llm." in n for n in names)  # written beside it, and not the one read
    assert out["draft_ms"]["ms"] == pytest.approx(truth.t_draft_ms, rel=0.08)
    assert out["verify_ms"]["ms"] == pytest.approx(truth.t_verify_ms, rel=0.08)
    assert out["sample_ms"]["ms"] > 0
    # the cycle line shows vLLM's phases only: no draft-extend (its trace has none), sample as a part of its own
    assert out["phases"] == ["draft", "verify", "sample"] and out["draft_extend_ms"] is None
    times = PhaseTimes.model_validate(out)
    line = cycle_account_line(times, times)
    assert line is not None and "draft-extend" not in line and "sample +0.00" in line, line
    twin = json.loads(gzip.decompress(Path(out["trace_path"]).read_bytes()))["traceEvents"]
    real = json.loads(gzip.decompress(REAL.read_bytes()))["traceEvents"]
    assert _keys(twin) == _keys(real)
    need = {"python_function", "cuda_runtime", "kernel"}
    assert need <= {e.get("cat") for e in twin} and need <= {e.get("cat") for e in real}
    real_t = parse_vllm_trace(REAL.read_bytes())
    twin_t = parse_vllm_trace(Path(out["trace_path"]).read_bytes())
    assert {r.phase for r in twin_t.ranges if r.decode_cycle} == {r.phase for r in real_t.ranges if r.decode_cycle}
    assert twin_t.model_runner == real_t.model_runner == "v2"


def test_phase_times_on_a_vllm_server_without_a_profiler_is_no_data_saying_how_to_enable_it(tmp_path):
    with open_sim_host(_scenario(tmp_path, "vllm-no-regression", None)) as host:
        ctx = ToolContext(host=host, run_id="sim-vllm-noprof")
        port = ctx.engine.parse_launch(host.hints.launch).port
        res = registry.call(ctx, "phase_times", {"port": port, "runs": 1, "requests_per_run": 1,
                                                 "max_new_tokens": 16})
    assert res.status == "no_data"
    assert "--profiler-config" in res.summary and "\n" not in res.summary
