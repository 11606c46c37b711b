"""Reproduce's own launch of today's configuration is profiled while up when a revert search is expected (#46): a
confirmed difference's phase then costs no launch of today's arm; where none is expected nothing is profiled."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.engine.actions.measure import _kept_arm_wanted
from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.tools.serving.plan import Plan, PlannedPhase


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _view(attribute_expected: float | None, *, plan: bool = True):
    phases = [PlannedPhase(step="reproduce", launches=1, expected=1.0),
              PlannedPhase(step="attribute", launches=4, expected=attribute_expected)]
    p = Plan.model_construct(port=30000, phases=phases, launches_max=5) if plan else None
    return SimpleNamespace(fact=lambda name, model: p if name == "plan" else None)


def test_the_reproduce_launch_is_profiled_only_when_the_plan_expects_a_revert_search():
    assert _kept_arm_wanted(_view(2.0))  # type: ignore[arg-type]
    assert not _kept_arm_wanted(_view(0.0))  # type: ignore[arg-type]  # must not fire: no revert search expected
    assert not _kept_arm_wanted(_view(2.0, plan=False))  # type: ignore[arg-type]  # no plan: nothing assumed


def test_a_lone_difference_s_phase_takes_today_s_arm_from_the_reproduce_launch(tmp_path):
    name = "sitecustomize-computed"  # CUDA_LAUNCH_BLOCKING from sitecustomize.py, measured on the baseline
    sb = build_sandbox(load_scenario(name), tmp_path / "box")
    host = SimHost(sb)
    try:
        out = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(tmp_path / "out")), host=host)
        report = json.loads(Path(out.files["json"]).read_text())
    finally:
        host.close()
        sb.remove()
    (cause,) = [c for c in report["attribution"]["causes"] if c["confirmed"]]
    assert cause["phase_effect"] is not None and cause["phase_effect"]["phase"] == "decode", cause
    (phases,) = [d for d in report["decisions"] if d["step"] == "attribute" and "phase times" in d["checked"]]
    assert "no extra launch" in phases["checked"] and "the reproduce step's launch" in phases["checked"], phases
    assert report["launches_made"] <= report["plan"]["launches_expected"] + 1
