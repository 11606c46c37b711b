"""The twin's vLLM box end to end through the tools: processes and titles, the engine found once, the benchmark's
server-side timing and acceptance from /metrics, envs.py as the gate catalog, the env vLLM writes."""

from __future__ import annotations

import pytest

from specdoctor.sim import open_sim_host
from specdoctor.toolkit import ToolContext, registry


def test_vllm_box_through_the_tools():
    with open_sim_host("vllm-no-regression") as host:
        ctx = ToolContext(host=host, run_id="sim-vllm")
        assert ctx.engine.name == "vllm"  # from the launch hint, without a command
        port = ctx.engine.parse_launch(host.hints.launch).port
        found = registry.call(ctx, "find_server_processes", {"port": port})
        assert found.ok, found.summary
        s = found.output["servers"][0]
        assert s["engine"] == "vllm" and list(s["ranks"]) == ["EngineCore"]
        assert s["args"]["speculative_algorithm"] == "eagle3" and s["args"]["speculative_num_steps"] == 3

        bench = registry.call(ctx, "benchmark", {"port": port, "runs": 3, "requests_per_run": 2,
                                                 "max_new_tokens": 64, "warmup_runs": 0})
        assert bench.ok, bench.summary
        out = bench.output
        assert out["accept_length"] == pytest.approx(2.53, abs=0.35)  # from the spec-decode counters
        assert out["median"] == pytest.approx(250, rel=0.15)  # the server's clock, not the twin's wall time
        assert all(r["latency_source"] == "e2e_latency" for run in out["runs"] for r in run["requests"])

        prop = registry.call(ctx, "check_env_propagation", {"port": port})
        assert prop.ok, prop.summary
        gates = registry.call(ctx, "scan_feature_gates", {"repo": host.hints.repo, "port": port})
        assert gates.ok, gates.summary
        assert {"VLLM_BATCH_INVARIANT", "VLLM_HOST_IP"} <= {g["name"] for g in gates.output["engine_gates"]}
