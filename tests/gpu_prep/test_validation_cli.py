"""The validation script end to end on the CPU (tiny model): files, their format, and accept lengths on target."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, root):
    out = tmp_path_factory.mktemp("h200")
    argv = [sys.executable, str(root / "benchmarks" / "spec_model_validation.py"), "--tiny", "--device", "cpu",
            "--ks", "1,3", "--taus", "1.5,2,4", "--gen", "160", "--prompt", "16", "--reps", "2",
            "--phase-reps", "5", "--sync", "both"]
    env = {**os.environ, "OUT": str(out), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=root, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return out, res.stdout


def test_files_and_table(tiny_run, validation):
    out, stdout = tiny_run
    assert sorted(p.name for p in out.iterdir()) == ["spec_validation.csv", "spec_validation.json",
                                                     "spec_validation.png"]
    assert (out / "spec_validation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = validation.Validation.model_validate_json((out / "spec_validation.json").read_text())
    assert doc.device == "cpu" and doc.graphs is False and doc.model.layers == 2
    assert doc.command[1].endswith("spec_model_validation.py") and "--tiny" in doc.command
    assert set(doc.phases) == {"decode", "draft_first", "draft_step", "verify1", "verify3", "accept1", "accept3"}
    assert all(p.median_ms > 0 and p.p10_ms <= p.median_ms <= p.p90_ms for p in doc.phases.values())
    # only feasible points: τ ≤ k+1, each in both sync modes
    assert sorted({(p.k, p.tau_target) for p in doc.points}) == [(1, 1.5), (1, 2.0), (3, 1.5), (3, 2.0), (3, 4.0)]
    assert len(doc.points) == 10 and {p.sync for p in doc.points} == {True, False}
    assert set(doc.worst_error_pct) == {"sync", "nosync"}
    assert doc.worst_error_pct["sync"] == max(abs(p.error_pct) for p in doc.points if p.sync)
    assert doc.self_check == {"greedy_k1_equals_plain": "ok", "greedy_k3_equals_plain": "ok",
                              "greedy_k5_equals_plain": "ok", "graphs_equal_eager": "ok"}
    assert "torch" in doc.fingerprint and "python" in doc.fingerprint
    with (out / "spec_validation.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 10 and float(rows[0]["measured_tps"]) == doc.points[0].measured_tps
    assert "worst |error| %" in stdout.splitlines()[-1]
    json.loads((out / "spec_validation.json").read_text())


def test_accept_length_lands_on_target(tiny_run, validation):
    out, _ = tiny_run
    doc = validation.Validation.model_validate_json((out / "spec_validation.json").read_text())
    for p in doc.points:
        assert p.tokens >= 2 * 160 and p.cycles >= 2
        assert abs(p.tau_measured - p.tau_target) <= 0.08 * p.tau_target, p
        if p.tau_target == p.k + 1:  # α = 1: every draft accepted, exactly
            assert p.tau_measured == p.k + 1 and p.alpha == 1.0


def test_prediction_uses_the_breakeven_model(tiny_run, validation):
    """Each point's prediction is tools.breakeven's τ/(k·t_draft + t_verify + overhead) from its own columns."""
    out, _ = tiny_run
    doc = validation.Validation.model_validate_json((out / "spec_validation.json").read_text())
    for p in doc.points:
        cycle = p.k * p.draft_ms + p.verify_ms + p.overhead_ms
        assert p.tau_star == pytest.approx(cycle / p.decode_ms, rel=2e-3)
        assert p.predicted_tps == pytest.approx(1000.0 * p.tau_measured / cycle, rel=0.05)
        assert p.overhead_ms >= doc.phases[f"accept{p.k}"].median_ms - 1e-4
