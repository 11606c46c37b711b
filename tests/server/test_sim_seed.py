"""Against the simulated seed box: processes, propagation, and the seeds' numbers (82 / 60 tok/s, claims 89/94)."""

from __future__ import annotations

import pytest

from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.sim import open_sim_host
from specdoctor.stats.comparator import compare_to_claim
from specdoctor.toolkit import ToolContext, registry

from .helpers import free_port


@pytest.fixture(scope="module")
def seed():
    with open_sim_host("seed") as host:
        yield host


def test_seed_processes_and_propagation(seed):
    ctx = ToolContext(host=seed, run_id="sim-find")
    want = parse_launch_command(seed.hints.launch)
    servers = registry.call(ctx, "find_server_processes", {"port": want.port}).output["servers"]
    s = next(x for x in servers if x["args"]["model_path"] == want.model_path)  # other sandboxes may run too
    assert s["port"] == want.port and len(s["ranks"]) == want.tp_size == 8
    assert sorted(s["ranks"]) == sorted(f"TP{i}" for i in range(8)) and s["detokenizer"]
    for key in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                "speculative_num_draft_tokens", "attention_backend", "tp_size"):
        assert s["args"][key] == getattr(want, key)
    prop = registry.call(ctx, "check_env_propagation", {"port": want.port})
    assert prop.ok, prop.summary
    rows = {r["name"]: r for r in prop.output["rows"]}
    assert rows["NCCL_CUMEM_ENABLE"]["status"] == "forced-by-sglang"
    assert set(rows["NCCL_CUMEM_ENABLE"]["workers"]) == set(s["ranks"])
    assert not [r for r in prop.output["rows"] if r["status"] == "dropped-for-workers"]  # seed loses nothing


def test_seed_numbers_reproduce_and_claims_are_different(seed, free_gpus):
    ctx = ToolContext(host=seed, run_id="sim-measure", auto_approve=True)
    bench = {"runs": 5, "requests_per_run": 3, "max_new_tokens": 64, "warmup_runs": 1}
    port = parse_launch_command(seed.hints.launch).port
    spec = registry.call(ctx, "benchmark", {"port": port, "label": "spec", **bench})
    assert spec.ok, spec.summary
    free_gpus(seed)  # a second Kimi K2.5 does not fit beside the user's on the eight cards
    launched = registry.call(ctx, "launch_server", {"command": seed.hints.launch, "python": seed.hints.python,
                                                   "drop_speculative": True, "port": free_port(), "timeout_s": 60,
                                                   "label": "baseline"})
    assert launched.ok, launched.summary
    try:
        base = registry.call(ctx, "benchmark", {"port": launched.output["port"], "label": "baseline",
                                               "log_path": launched.output["log_path"], **bench})
    finally:
        stopped = registry.call(ctx, "stop_server", {})
    assert stopped.ok and stopped.output["stopped"] == [launched.output["pgid"]]
    assert base.ok, base.summary
    b, s = base.output, spec.output
    assert 76 <= b["median"] <= 88 and b["ci_low"] <= b["median"] <= b["ci_high"] and b["accept_length"] is None
    assert 54 <= s["median"] <= 66 and s["ci_low"] <= s["median"] <= s["ci_high"] and s["accept_length"] > 1
    assert compare_to_claim(b["samples"], seed.hints.expect["baseline"]).outcome == "DIFFERENT"
    assert compare_to_claim(s["samples"], seed.hints.expect["spec"]).outcome == "DIFFERENT"
    cmp = registry.call(ctx, "compare_samples", {"a": b["samples"], "b": s["samples"]})
    assert cmp.output["outcome"] == "DIFFERENT" and cmp.output["verdict"] == "worse"
