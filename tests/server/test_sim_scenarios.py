"""Every built-in twin scenario: processes and args, the propagation table vs the scenario's truth, and
fingerprint_diff against the saved good fingerprint (lost-nccl-env names a lost NCCL variable first)."""

from __future__ import annotations

import pytest

from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.sim import list_scenarios, load_scenario, open_sim_host
from specdoctor.toolkit import ToolContext, registry

SCENARIOS = [n for n, _ in list_scenarios()]  # (name, description) pairs


def test_the_issue_scenarios_exist():
    assert {"seed", "lost-nccl-env"} <= set(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_processes_propagation_fingerprint(name):
    truth = load_scenario(name)
    with open_sim_host(name) as host:
        ctx = ToolContext(host=host, run_id=f"sim-{name}")
        want = parse_launch_command(host.hints.launch)
        found = registry.call(ctx, "find_server_processes", {"port": want.port})
        assert found.ok, found.summary
        # other sandboxes (concurrent test runs) may run servers too: pick this sandbox's by its model path
        s = next(x for x in found.output["servers"] if x["args"]["model_path"] == want.model_path)
        assert len(s["ranks"]) == want.tp_size and s["detokenizer"] and s["port"] == want.port
        for key in ("tp_size", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens", "attention_backend", "model_path"):
            assert s["args"][key] == getattr(want, key), key

        prop = registry.call(ctx, "check_env_propagation", {"port": want.port})
        assert prop.ok, prop.summary
        rows = {r["name"]: r for r in prop.output["rows"]}
        dropped = {r["name"] for r in prop.output["rows"] if r["status"] == "dropped-for-workers"}
        expect_dropped = set(truth.server.worker_env_drop) & set(truth.shell_env)
        assert dropped == expect_dropped
        for var in expect_dropped:  # present in shell and parent, absent in every worker
            r = rows[var]
            assert r["shell"] == r["parent"] == truth.shell_env[var]
            assert set(r["workers"]) == set(s["ranks"]) and all(v is None for v in r["workers"].values())
        for var, value in truth.shell_env.items():
            if var not in expect_dropped and var.startswith("NCCL_"):
                assert rows[var]["status"] == "propagated" and set(rows[var]["workers"].values()) == {value}
        assert rows["CUDA_DEVICE_MAX_CONNECTIONS"]["status"] == "forced-by-sglang"
        if truth.sitecustomize:
            assert prop.output["sitecustomize"] and rows["NCCL_PROTO"]["from_sitecustomize"]

        if host.hints.good_fingerprint:
            fp = registry.call(ctx, "fingerprint", {"port": want.port, "repo": host.hints.repo,
                                                   "python": host.hints.python})
            assert fp.ok and fp.output["gpus"] and fp.output["nccl_version"]
            diff = registry.call(ctx, "fingerprint_diff", {"a": host.hints.good_fingerprint, "b": fp.output})
            assert diff.ok, diff.summary
            if expect_dropped:
                first = diff.output["changes"][0]
                assert first["key"] in {f"worker_env.{v}" for v in expect_dropped} and first["after"] is None
                assert not any(c["key"].startswith("gpus[") and c["key"].endswith(".name")
                               for c in diff.output["changes"])
