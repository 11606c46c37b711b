"""The NCCL playbook end to end on the simulated GPU host: sim:nccl-win and sim:lost-nccl-env."""

from __future__ import annotations

import socket

import pytest

from specdoctor.commands.sweep_nccl import run_sweep
from specdoctor.tools.nccl.nccl import NcclInventory, NcclSweep
from specdoctor.tools.nccl.nccl_promote import NcclPromotion


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


GRID = ["NCCL_PROTO=default,LL,Simple", "NCCL_ALGO=default,Ring"]


@pytest.fixture(scope="module")
def nccl_win(tmp_path_factory):
    return run_sweep("sim:nccl-win", port=None, launch=None, python=None, grid=GRID, repeats=5, yes=True,
                     promote_port=_free_port(), out=str(tmp_path_factory.mktemp("nccl-win")))


@pytest.fixture(scope="module")
def lost_env(tmp_path_factory):
    return run_sweep("sim:lost-nccl-env", port=None, launch=None, python=None, grid=GRID, repeats=5, yes=True,
                     promote_port=_free_port(), out=str(tmp_path_factory.mktemp("lost-env")))


def test_nccl_win_inventory(nccl_win):
    inv = NcclInventory.model_validate(nccl_win["inventory"])
    assert (inv.interconnect, inv.tp, inv.hidden_size, inv.draft_tokens) == ("pcie", 8, 7168, 3), inv.notes
    assert [s.bytes for s in inv.sizes] == [14336, 43008, 229376, 688128]
    assert inv.bench_tool == "all_reduce_perf" and inv.launcher_drops is False
    assert inv.engine_forced_env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "8 (always)"


def test_nccl_win_sweep_finds_ll(nccl_win):
    sweep = NcclSweep.model_validate(nccl_win["sweep"])
    assert sweep.tool == "all_reduce_perf" and sweep.tp == 8
    best = next(r for r in sweep.results if r.label == sweep.best)
    assert best.env.get("NCCL_PROTO") == "LL" and best.outcome == "DIFFERENT" and best.pct_change < -10
    by_size = {p.size: p for p in best.points}
    for size in (14336, 43008):  # decode/verify at batch 1: LL's lower latency wins outright
        assert (by_size[size].outcome, by_size[size].verdict) == ("DIFFERENT", "better")
    if best.verdict == "trade-off":  # LL's lower bandwidth may lose at the largest (b=16 verify) size
        assert best.worse_at and any("trade" in n or "slower" in n for n in sweep.notes)
    assert all(r.env.get("NCCL_PROTO") == "LL" for r in sweep.results if r.promote)
    simple = next(r for r in sweep.results if r.label == "PROTO=Simple")
    assert not simple.promote
    assert "NCCL_PROTO" in best.experiment_only and any("experiment-only" in n for n in sweep.notes)


def test_nccl_win_confirmed_end_to_end_with_proof(nccl_win):
    pr = NcclPromotion.model_validate(nccl_win["promotion"])
    assert not pr.launcher_drops and pr.best is not None
    best = next(r for r in pr.results if r.label == pr.best)
    assert best.env.get("NCCL_PROTO") == "LL"
    assert best.outcome == "DIFFERENT" and best.verdict == "better" and pr.best_gain_pct > 3
    assert pr.best_delta_ci[0] > 0  # the whole 95 % CI of the tok/s gain is above zero
    for p in best.propagation:  # proven in every TP worker, by /proc/PID/environ and by NCCL's own log
        assert p.ok and p.env_checked and len(p.workers) == 8 and set(p.workers.values()) == {p.expected}
        assert len(p.logged_pids) >= 8
    assert "sitecustomize" in pr.not_sitecustomize and "every Python process" in pr.not_sitecustomize
    assert "Environment=" in pr.where_to_set


def test_lost_env_reported_before_any_claim(lost_env):
    inv = NcclInventory.model_validate(lost_env["inventory"])
    assert inv.launcher_drops is True
    assert inv.notes[0].startswith("the launcher drops NCCL variables")
    assert "NCCL_PROTO" in inv.notes[0] and "NCCL_ALGO" in inv.notes[0]
    pr = NcclPromotion.model_validate(lost_env["promotion"])
    assert pr.launcher_drops and pr.best is None and pr.baseline_median is None
    for res in pr.results:
        assert not res.propagated and res.median is None and res.skipped.startswith("not measured")
        lost = [p for p in res.propagation if not p.ok]
        assert lost and all(v is None for p in lost for v in p.workers.values())
    assert "launcher drops NCCL variables" in pr.summary_line()


def test_sweep_runs_as_a_playbook_with_audit_report_and_checkpoint(nccl_win):
    import json
    from pathlib import Path

    from specdoctor.engine.runs import load_record

    run = nccl_win["run"]
    out = Path(run["out_dir"])
    report = json.loads((out / "report.json").read_text())
    audit = [json.loads(line) for line in (out / "audit.jsonl").read_text().splitlines() if line.strip()]
    assert any("all_reduce_perf" in e["command"] for e in audit)  # every command of the sweep is on record
    assert sum("setsid" in e["command"] for e in audit) >= 2  # the relaunches of the promotion too
    steps = {d["step"] for d in report["decisions"]}
    assert {"locate", "inventory", "nccl", "nccl_promote", "conclude"} <= steps
    rec = load_record(run["run_id"])
    assert rec.playbook == "nccl-sweep" and rec.status == "finished"
