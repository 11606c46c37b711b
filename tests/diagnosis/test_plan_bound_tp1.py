"""The launch plan's bound on a one-GPU box with a clean checkout, where nothing else leaves slack.

The real launch-flag run (H100, SGLang 0.5.17, `--disable-cuda-graph`) printed "planned up to 4 launches; made 6":
the attribute step's phase profile of its confirmed cause was not counted. Here the twin of the real run's box (TP 1,
clean checkout, the user's server running) gets a different launch flag than the real run had — fewer draft steps
than the good run — so the bound is checked on a story the bug was not seen on.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import yaml

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import SimHost, build_sandbox, load_scenario

REAL = Path(__file__).parents[1] / "fixtures" / "sglang-0.5.17-h200" / "scenario.yaml"


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def _story(tmp_path: Path, *, shell_in_good_run: bool = True) -> Path:
    raw = yaml.safe_load(REAL.read_text())
    raw.pop("time_scale", None)
    good = raw["server"]["launch"].replace("{port}", "30000")
    raw["server"]["launch"] = raw["server"]["launch"].replace("--speculative-num-steps 3", "--speculative-num-steps 1")
    raw["server"]["running"] = True
    raw["name"] = "tp1-steps-cut"
    hw = raw["hardware"]
    # the good run had the same shell (else each variable is one more difference to search) and what SGLang forces
    shell = {k: str(v) for k, v in raw["shell_env"].items()} if shell_in_good_run else {}
    forced = {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "8",
              "CUDA_MODULE_LOADING": "AUTO"}
    raw["good_fingerprint"] = {
        "taken_at": "2026-12-02T10:00:00Z", "host": "vm", "commit": "{commit}", "sglang_version": "0.5.17",
        "driver": hw["driver"], "cuda": hw["cuda"], "nccl_version": hw["nccl"],
        "gpus": [{"index": 0, "name": hw["gpu_name"], "pcie_gen": 5, "pcie_width": 16, "clocks_sm_max": 1980}],
        "worker_env": {**forced, **shell}, "parent_env": shell, "launch": good,
        "measurements": {"spec_tps": 600.0, "accept_length": 2.98}}
    raw["hints"] = {"expect": {"spec": 600}}
    raw["truth"] = {"verdict": "environment", "causes": [
        {"kind": "launch-flag", "name": "speculative_num_steps", "source": "launch line", "share": 1.0}]}
    path = tmp_path / "tp1-steps-cut.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _investigate(tmp_path: Path, **kw) -> tuple[dict, str]:
    sc = load_scenario(_story(tmp_path, **kw))
    root = Path(tempfile.mkdtemp(prefix="tp1-plan-"))
    os.chmod(root, 0o777)
    host = SimHost(build_sandbox(sc, root))
    try:
        out = investigate(InvestigateOptions(host="sim:tp1-steps-cut", yes=True, out=str(tmp_path / "out")),
                          host=host)
    finally:
        host.close()
    return json.loads(Path(out.files["json"]).read_text()), Path(out.files["md"]).read_text()


def test_one_confirmed_cause_on_one_gpu_stays_within_the_planned_launches(tmp_path):
    report, md = _investigate(tmp_path)
    assert report["verdict"] == "environment", report["summary"]
    assert "--speculative-num-steps 1 (good run: 3)" in report["summary"]
    steps = {p["step"]: p["launches"] for p in report["plan"]["phases"]}
    assert "bisect" not in steps and "nccl_promote" not in steps  # no slack from other steps' caps
    made, most = report["launches_made"], report["plan"]["launches_max"]
    # reproduce 1 + attribute 2 + restart 1: the cause's phase profile came from those 2 trials' own servers (#46),
    # the cap keeps its 2 for an arm no trial could profile
    assert made == most - 2 == report["plan"]["launches_expected"], (made, report["plan"])
    assert f"made {made}" in md and "more than planned" not in md
    # fewer draft steps lengthen no phase: a draft step's near-empty host range growing 0.003 → 0.010 ms was named
    (cause,) = report["attribution"]["causes"]
    assert "phase_effect" in cause and cause["phase_effect"] is None, cause["phase_effect"]


def test_a_search_over_several_differences_passes_the_first_plan_but_not_the_one_consented_to(tmp_path):
    """Three shell variables the good run lacked are differences too: the revert search grows past the bound the
    first plan printed before list_deltas; the plan re-estimated before the stop lists them (list_deltas is a read)
    and bounds the search, so the report's plan (the one in force at the stop) was kept (#46)."""
    report, md = _investigate(tmp_path, shell_in_good_run=False)
    made, plan = report["launches_made"], report["plan"]
    first, consent = (next(e for e in plan["estimates"] if e["stage"] == s) for s in ("first", "consent"))
    assert plan["stage"] == "consent" and consent["launches_max"] == plan["launches_max"]
    # the consent plan's cap grew for the listed differences, and bounds what was made (its phase profile, taken on
    # the trials' own servers since #46, no longer carries the search past the first plan's cap)
    assert first["launches_max"] < consent["launches_max"] and made <= consent["launches_max"], (made, plan)
    assert f"made {made}" in md and "more than planned" not in md
