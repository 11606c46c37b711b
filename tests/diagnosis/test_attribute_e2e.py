"""End to end on the twin: the attribute step's revert trials name what changed, and name nothing when nothing did.

Each story runs the whole regression playbook (about a minute each): a sitecustomize forcing an NCCL variable (the
trial needs the shadow sitecustomize), a launch flag changed since the good run, and a slow patch under a backend
the server never uses (the must-not-fire case: no revert may become a cause).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import SimHost, build_sandbox, load_scenario


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _run(name: str, tmp_path: Path) -> tuple[dict, dict[str, object]]:
    """The report, and what the box looked like after the run (the sandbox goes with its host)."""
    sc = load_scenario(name)
    root = Path(tempfile.mkdtemp(prefix=f"attr-{name}-"))
    os.chmod(root, 0o777)
    sb = build_sandbox(sc, root)
    host = SimHost(sb)
    try:
        out = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(tmp_path / "out")), host=host)
        sites = list(root.rglob("site-packages/sitecustomize.py"))
        after = {"site": sites[0].read_text() if sites else None, "expected_site": sc.sitecustomize,
                 "leftovers": _revert_leftovers(root)}
    finally:
        host.close()
    return json.loads(Path(out.files["json"]).read_text()), after


def _revert_leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("revert") if p.is_dir() and ".specdoctor" in p.parts and any(p.iterdir())]


def test_a_variable_forced_by_sitecustomize_is_named_with_its_share_and_nothing_is_left_behind(tmp_path,
                                                                                             trial_envs_reached):
    report, after = _run("sitecustomize-foreign", tmp_path)
    assert trial_envs_reached() >= 2  # the shadow sitecustomize took both variables out of every worker
    assert report["verdict"] == "environment", report["summary"]
    assert "NCCL_P2P_DISABLE=1 set by" in report["summary"] and " tok/s [" in report["summary"]
    assert "NCCL_IB_DISABLE" not in report["summary"]  # reverted too, changed nothing: not a cause
    causes = report["attribution"]["causes"]
    assert [c["name"].split("=")[0] for c in causes] == ["NCCL_P2P_DISABLE"] and causes[0]["delta"] < 0
    first = report["game_plan"][0]
    assert first["basis"] == "measured" and "NCCL_P2P_DISABLE" in (first["command"] or "")
    assert after["site"] == after["expected_site"]  # the user's file is only read
    assert report["launches_made"] <= report["plan"]["launches_max"], (report["launches_made"], report["plan"])
    assert not after["leftovers"]  # the shadow module went with its trial


def test_a_launch_flag_changed_since_the_good_run_is_named(tmp_path):
    report, _ = _run("attn-backend-flag", tmp_path)
    assert report["verdict"] == "environment", report["summary"]
    assert "--attention-backend triton" in report["summary"]
    command = report["game_plan"][0]["command"] or ""
    assert "--attention-backend fa3" in command and "triton" not in command and "--model-path" in command
    # the plan's bound holds when one cause is confirmed and profiled (a real launch-flag run made 6 of 'up to 4')
    assert report["launches_made"] <= report["plan"]["launches_max"], (report["launches_made"], report["plan"])


def test_a_slow_patch_under_an_unused_backend_names_no_cause(tmp_path):
    report, _ = _run("unused-backend-patch", tmp_path)
    assert report["verdict"] == "no-regression", report["summary"]
    att = report.get("attribution") or {"causes": []}
    assert not [c for c in att["causes"] if c["confirmed"]]
