"""A simulated fleet over the loopback sshd: 8 simulated hosts (2 planted outliers, 1 harmless departure),
1 unreachable host and 1 that refuses the login; 5 noise seeds, no false outlier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.engine.survey_graph import run_survey
from specdoctor.fleet.models import FleetAnalysis, SurveyParams
from specdoctor.fleet.targets import parse_hosts
from specdoctor.sim.fleet import SimFleet, build_fleet

SPECDOCTOR = str(Path(sys.executable).with_name("specdoctor"))


def _params(fleet: SimFleet) -> SurveyParams:
    return SurveyParams(targets=parse_hosts(str(fleet.hosts_file)), identity_files=[str(fleet.key_path)],
                        known_hosts=str(fleet.known_hosts), ssh_config=str(fleet.ssh_config))


def _check(fleet: SimFleet, analysis: FleetAnalysis, seed: int) -> None:
    truth = fleet.truth()
    slow = sorted(h for h, p in truth.items() if p.outlier)
    assert analysis.outliers == slow, f"seed {seed}: outliers {analysis.outliers}, planted {slow}"
    for name, planted in truth.items():
        row = analysis.host(name)
        assert row is not None
        keys = [d.key for d in row.deviations]
        # the planted fields, and nothing of more than low impact besides them
        assert set(planted.fields) <= set(keys), f"seed {seed}: {name} departures {keys}, planted {planted.fields}"
        assert set(planted.fields) == {d.key for d in row.deviations if d.impact != "low"}
        if planted.outlier:
            assert row.direction == "worse"
            assert keys[0] in planted.fields, f"seed {seed}: {name}'s most likely cause is {keys[0]}"
    for h in analysis.hosts:
        if h.name not in truth and h.status == "ok":
            assert not h.outlier and [d.key for d in h.deviations if d.impact != "low"] == [], (seed, h)
    assert sorted(analysis.unreachable) == sorted(fleet.lost)
    statuses = {h.name: h.status for h in analysis.hosts}
    assert {statuses[n] for n in fleet.spec.unreachable} == {"unreachable"}
    assert {statuses[n] for n in fleet.spec.refuse_login} == {"auth-failed"}


def test_cli_survey_finds_both_planted_outliers_and_reports_the_lost_hosts(tmp_path):
    with build_fleet("alike", noise_seed=0) as fleet:
        assert len(fleet.sandboxes) >= 8 and len(fleet.spec.unreachable) >= 1
        out = tmp_path / "report"
        env = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path / "home")}
        res = subprocess.run([SPECDOCTOR, "survey", *fleet.cli_options(), "--parallel", "8", "--out", str(out)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        data = json.loads((out / "fleet.json").read_text())
        analysis = FleetAnalysis.model_validate(data["analysis"])
        _check(fleet, analysis, 0)
        md = (out / "fleet.md").read_text()
        assert "worker_env.NCCL_PROTO" in md and "gpus[1].pcie_width" in md and "h09" in md
        assert (out / "throughput.png").read_bytes()[:4] == b"\x89PNG"
        assert "data:image/png;base64," in (out / "fleet.html").read_text()
        assert "odd ones out: h06, h07" in res.stdout


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_no_false_outlier_over_noise_seeds(seed, tmp_path):
    with build_fleet("alike", noise_seed=seed) as fleet:
        run = run_survey(_params(fleet), checkpoint=str(tmp_path / "s.sqlite"), parallel=8)
        assert run.analysis is not None
        _check(fleet, run.analysis, seed)
