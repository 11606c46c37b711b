"""breakeven_empirical on the simulated host: relaunch with SGLANG_SIMULATE_ACC_LEN, find where tok/s crosses baseline."""

from __future__ import annotations

import pytest

from specdoctor.sim import open_sim_host
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.breakeven.breakeven_empirical import EmpiricalBreakeven, crossing


def test_crossing_interpolates():
    assert crossing([1.5, 2.5, 3.0], [50.0, 84.0, 97.0], 82.0) == pytest.approx(1.5 + 32 / 34)
    assert crossing([1.0, 2.0], [10.0, 20.0], 50.0) is None
    assert crossing([1.0, 2.0], [60.0, 70.0], 50.0) is None


def test_seed_measured_breakeven_matches_the_story(tmp_path, free_gpus):
    with open_sim_host("seed", root=tmp_path) as host:
        free_gpus(host)  # the user's Kimi K2.5 fills the eight cards
        ctx = ToolContext(host=host, run_id="t-empirical", auto_approve=True)
        res = registry.call(ctx, "breakeven_empirical", {
            "command": host.hints.launch, "python": host.hints.python, "port": 30111,
            "accept_lens": [1.5, 2.5, 3.0], "runs": 3, "requests_per_run": 2, "max_new_tokens": 64})
        assert res.ok, res.summary
        out = EmpiricalBreakeven.model_validate(res.output)
        assert out.baseline_measured and out.baseline_tps == pytest.approx(82, rel=0.08)
        assert out.tau_star_measured == pytest.approx(2.46, abs=0.2)  # the seeds' break-even
        assert out.tau_star_model == pytest.approx(2.46, abs=0.2)
        assert out.points[0].tps < out.baseline_tps < out.points[-1].tps
        for p in out.points:  # the twin honours the variable, so the server reports what was forced
            assert p.accept_len_measured == pytest.approx(p.accept_len_set, rel=0.1)
        launches = [e.command for e in res.evidence if "launch_server" in e.command]
        assert launches, "the tool relaunched the server"
        for forced in ("1.5", "2.5", "3"):  # each launch carried its forced accept length
            assert any(f"SGLANG_SIMULATE_ACC_LEN={forced}" in c for c in launches), launches


def test_needs_approval_without_yes(tmp_path):
    with open_sim_host("seed", root=tmp_path) as host:
        ctx = ToolContext(host=host, run_id="t-empirical-approval")
        res = registry.call(ctx, "breakeven_empirical", {"command": host.hints.launch, "accept_lens": [1.5, 3]})
        assert res.status == "needs_approval" and not res.evidence


def test_vllm_forces_the_accept_length_through_its_speculative_config(tmp_path, free_gpus):
    """vLLM 0.26 has no variable for it: the launch line's speculative config gets synthetic rejection sampling."""
    with open_sim_host("vllm-no-regression", root=tmp_path) as host:
        free_gpus(host)
        ctx = ToolContext(host=host, run_id="t-empirical-vllm", auto_approve=True)
        res = registry.call(ctx, "breakeven_empirical", {
            "command": host.hints.launch, "python": host.hints.python, "port": 30112, "baseline_tps": 143.0,
            "accept_lens": [1.5, 2.5], "runs": 3, "requests_per_run": 2, "max_new_tokens": 64})
        assert res.ok, res.summary
        out = EmpiricalBreakeven.model_validate(res.output)
        for p in out.points:  # the /metrics counters say what was forced
            assert p.accept_len_measured == pytest.approx(p.accept_len_set, rel=0.15)
        launches = [e.command for e in res.evidence if "vllm serve" in e.command]
        assert any('"synthetic_acceptance_length":1.5' in c for c in launches), launches
        assert launches and not any("SGLANG_" in c for c in launches)
