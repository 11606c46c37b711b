"""The claims' recorded workload is measured on your running server before the stop (#46): the speculative server
is not launched again after it only to be measured with those prompts, and the claims are judged like for like."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.report.run_facts import LAUNCH_MARK
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.sim.ports import free_port


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


def test_the_recorded_workload_is_read_on_the_running_server_not_on_a_launch(tmp_path: Path) -> None:
    sb = build_sandbox(load_scenario("workload-mismatch"), tmp_path / "box", start_server=False, port=free_port())
    host = SimHost(sb)
    try:
        sb.start_server(host)
        out = investigate(InvestigateOptions(host="sim:workload-mismatch", yes=True, out=str(tmp_path / "out")),
                          host=host)
    finally:
        host.close()
        sb.remove()
    report = json.loads(Path(out.files["json"]).read_text())
    assert out.verdict == "no-regression", report["summary"]
    launches = [c["command"] for c in report["commands"] if LAUNCH_MARK in c["command"]]
    assert len(launches) == 2, launches  # the baseline (no speculation) and your server's restart
    assert not any("speculative" in c for c in launches[:-1]), launches  # no speculative trial server
    (spec,) = [c for c in report["claims"] if c["metric"] == "spec"]
    assert spec["outcome"] == "SAME", spec  # judged on the HumanEval reading (chat prompts give ~162 of 195)
