"""Each source of an environment cause, reverted in a trial the way that source needs, and the trial's workers
checked in /proc: nccl.conf (NCCL's default set at launch over the file), a login profile's export (unset at
launch). The sitecustomize and .pth sources are checked where their stories run
(tests/diagnosis/test_attribute_e2e.py, tests/engine/test_startup_hook_stories.py); a launcher that drops a
variable and an engine-forced one in tests/server/test_trial_env.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import load_scenario, open_sim_host


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("name", ["nccl-conf-simple", "bashrc-launch-blocking"])
def test_the_trial_env_in_every_worker_is_the_reference(name, tmp_path, trial_envs_reached):
    with open_sim_host(name) as host:
        out = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(tmp_path / "o")), host=host)
    report = json.loads(Path(out.files["json"]).read_text())
    assert out.verdict == load_scenario(name).truth.verdict, report["summary"]
    assert trial_envs_reached() >= 1
