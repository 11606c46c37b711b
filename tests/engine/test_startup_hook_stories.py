"""A variable set by a .pth start-up hook (no sitecustomize, no nccl.conf, nothing in the launch line) is named with
its file and reverted in a trial; the same hook present in the good run is not blamed (#32 part 1). Before, its
source was "injected after start-up (source not found)", nothing could revert it, and the run ended inconclusive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import open_sim_host


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _report(name: str, tmp_path: Path) -> dict:
    with open_sim_host(name) as host:
        out = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(tmp_path / "o")), host=host)
    return json.loads(Path(out.files["json"]).read_text())


def test_a_pth_hook_variable_is_found_by_its_file_and_reverted(tmp_path, trial_envs_reached):
    r = _report("pth-hook-env", tmp_path)
    assert trial_envs_reached() >= 1  # the trial interpreter skipped the hook: no worker had the variable
    assert r["verdict"] == "environment"
    (cause,) = [c for c in r["attribution"]["causes"] if c["confirmed"]]
    assert cause["name"].startswith("NCCL_PROTO=Simple set by ") and cause["name"].endswith("zz_nccl_bench_tuning.pth")
    assert cause["delta"] < 0 and "a .pth start-up hook" in (cause["fix"] or "")
    assert "source not found" not in json.dumps(r["decisions"])


def test_the_same_hook_in_the_good_run_is_not_blamed(tmp_path):
    r = _report("pth-hook-shared", tmp_path)
    assert r["verdict"] == "no-regression"
    assert not [c for c in (r.get("attribution") or {}).get("causes", []) if c["confirmed"]]
