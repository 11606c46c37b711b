"""The "Must show" items on the simulated GPU host (real git repo, real server processes, simulated numbers)."""

from __future__ import annotations

import pytest

from specdoctor.host import open_host
from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.sim.ports import free_port
from specdoctor.toolkit import ToolContext, registry

FLASH = "python/sglang/srt/layers/attention/flashinfer_mla_backend.py"
KIMI = "python/sglang/srt/models/kimi_k25.py"


@pytest.fixture(scope="module")
def seed():
    host = open_host("sim:seed")
    try:
        yield host
    finally:
        host.close()


def _ctx(host, run_id: str) -> ToolContext:
    return ToolContext(host=host, run_id=run_id, auto_approve=True)


def test_seed_catalog_triage_gates_script(seed):
    ctx, repo = _ctx(seed, "must-show"), seed.hints.repo
    port = parse_launch_command(seed.hints.launch).port
    cat = registry.call(ctx, "catalog_diffs", {"repo": repo})
    names = sorted(f["path"].rsplit("/", 1)[-1] for f in cat.output["files"])
    assert names == ["communicator.py", "deepseek_v2.py", "engine.py", "flashinfer_mla_backend.py", "kimi_k25.py",
                     "llama_eagle3.py", "scheduler.py", "topk.py"]

    tri = registry.call(ctx, "triage_diffs", {"repo": repo, "port": port})
    assert tri.ok and tri.output["served"]["source"] in ("server_info", "find_server_processes")
    rows = {r["path"]: r for r in tri.output["rows"]}
    assert rows[FLASH]["on_hot_path"] is False and "triton" in rows[FLASH]["reason"]
    logging = sorted(p.rsplit("/", 1)[-1] for p, r in rows.items() if r["logging_only"])
    assert logging == ["engine.py", "scheduler.py"]
    assert rows[KIMI]["essential"] and [p for p, r in rows.items() if r["essential"]] == [KIMI]
    first = min(rows.values(), key=lambda r: r["priority"])
    assert first["on_hot_path"] and not first["logging_only"] and not first["essential"]

    gates = registry.call(ctx, "scan_feature_gates", {"repo": repo, "port": port, "python": seed.hints.python})
    oea = next(g for g in gates.output["gates"] if g["name"] == "SGLANG_OEA_K0")
    assert oea["default"].strip("'\"") == "0" and oea["state"] == "off-by-default-and-unset"
    workers = [k for k in oea["values"] if k.startswith("sglang::scheduler_TP")]
    assert len(workers) == 8 and "parent" in oea["values"] and all(v is None for v in oea["values"].values())

    script = registry.call(ctx, "apply_patches", {"repo": repo, "files": [KIMI], "script": seed.hints.patch_script,
                                                   "python": seed.hints.python, "script_args": [repo]})
    assert script.ok, script.summary
    quoted = [a["line"] for a in script.output["ambiguous"]]
    assert "2. WARN - could not find class definition" in quoted
    restored = registry.call(ctx, "restore_worktree", {"repo": repo})
    assert restored.ok and restored.output["verified"]


def test_seed_essentials_from_user_list_cost_no_launch(seed):
    ctx = _ctx(seed, "essentials")
    res = registry.call(ctx, "find_essential_patches", {"repo": seed.hints.repo, "launch": seed.hints.launch,
                                                        "essential": ["kimi_k25.py"]})
    assert res.ok and res.output["essential"] == [KIMI] and res.output["launches"] == 0


def test_single_culprit_isolated_in_at_most_5_launches(free_gpus):
    with open_host("sim:single-culprit") as host:
        free_gpus(host)  # the user's Kimi K2.5 fills the eight cards
        ctx, repo = _ctx(host, "bisect"), host.hints.repo
        before = registry.call(ctx, "backup_worktree", {"repo": repo}).output["hash"]
        order = [r["path"] for r in registry.call(ctx, "triage_diffs", {"repo": repo, "launch": host.hints.launch})
                 .output["rows"]]
        res = registry.call(ctx, "bisect_patches", {"repo": repo, "launch": host.hints.launch,
                                                    "python": host.hints.python, "essential": host.hints.essential,
                                                    "order": order, "port": free_port()})
        assert res.ok, res.summary
        out = res.output
        assert out["culprits"] == ["python/sglang/srt/speculative/eagle_worker.py"] and out["confirmed"]
        assert out["launches"] <= 5 < out["naive_launches"] + 1
        # the phase it moved, from the confirming trials' own servers: no launch only to profile (#46)
        assert out["phase_effect"]["phase"] == "verify" and out["phase_launches"] == 0 and out["phase_from_trials"] == 2
        assert out["restored"]
        again = registry.call(ctx, "restore_worktree", {"repo": repo})
        assert again.output["actual_hash"] == before and not again.output["changed_anything"]


def test_gate_leak_enabled_at_runtime_in_workers():
    with open_host("sim:gate-leak") as host:
        ctx = _ctx(host, "gates")
        port = parse_launch_command(host.hints.launch).port
        res = registry.call(ctx, "scan_feature_gates", {"repo": host.hints.repo, "port": port})
        oea = next(g for g in res.output["gates"] if g["name"] == "SGLANG_OEA_K0")
        assert oea["state"] == "ENABLED-at-runtime"
        workers = {k: v for k, v in oea["values"].items() if k.startswith("sglang::scheduler_TP")}
        assert len(workers) == 8 and set(workers.values()) == {"2"}
