"""phase_times on the twin: SGLang's profiler routes write a real-shaped trace holding the scenario's phase times."""

from __future__ import annotations

import pytest

from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.sim import open_sim_host
from specdoctor.sim.predict import predict
from specdoctor.toolkit import ToolContext, registry


@pytest.fixture(scope="module")
def seed():
    with open_sim_host("seed") as host:
        yield host


def test_seed_verify_is_measured_from_the_profiler(seed):
    ctx = ToolContext(host=seed, run_id="sim-phases")
    port = parse_launch_command(seed.hints.launch).port
    res = registry.call(ctx, "phase_times", {"port": port, "runs": 3, "requests_per_run": 2, "max_new_tokens": 48,
                                             "baseline_tps": [82.0, 81.0, 83.0]})
    assert res.ok, res.summary
    out = res.output
    truth = predict(seed.sandbox)  # type: ignore[attr-defined]
    assert out["source"] == "profiler-gpu" and out["cycles"] >= 60 and out["steps"] == 2
    assert out["verify_ms"]["ms"] == pytest.approx(truth.t_verify_ms, rel=0.06)
    assert out["draft_ms"]["ms"] == pytest.approx(truth.t_draft_ms, rel=0.06)
    lo, hi = out["verify_ms"]["ci"]
    assert lo <= out["verify_ms"]["ms"] <= hi and out["verify_ms"]["cpu_ms"] < out["verify_ms"]["ms"]
    assert "TARGET_VERIFY" in out["verify_ms"]["source"] and out["decode_ms"]["source"].startswith("derived")
    assert out["overhead"]["tps_with"] < out["overhead"]["tps_without"]
    assert out["trace_path"].endswith("-TP-0.trace.json.gz") and "/profile/specdoctor-" in out["trace_path"]
