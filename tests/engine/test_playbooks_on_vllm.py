"""The playbooks other than `regression` (which the corpus's vLLM stories run) on a vLLM box: every step ends ok or
skipped with a reason, the report names vLLM, and the box's checkout is left as found. Cheap ones only here; the
patch search and the NCCL sweep on vLLM run in the corpus (vllm-draft-sync, vllm-tp2-nccl-proto)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.sim.ports import free_port


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize(("playbook", "verdict"), [("gate-audit", "inconclusive"),
                                                   ("breakeven", "baseline-not-reproducible")])
def test_a_playbook_runs_every_step_on_a_vllm_box(playbook: str, verdict: str, tmp_path: Path) -> None:
    sc = load_scenario("vllm-draft-sync")
    sb = build_sandbox(sc, tmp_path / "box", start_server=False, port=free_port())
    host = SimHost(sb)
    try:
        sb.start_server(host)
        status = host.run(["git", "-C", sb.repo, "status", "--porcelain=v1", "-uall"]).stdout
        out = investigate(InvestigateOptions(host="local:vllm-draft-sync", yes=True, playbook=playbook,
                                             out=str(tmp_path / "out")), host=host)
        report = json.loads(Path(out.files["json"]).read_text())
        steps = {d["step"]: d for d in report["decisions"]}
        bad = {k: d["status"] for k, d in steps.items() if d["status"] not in ("ok", "skipped")}
        assert not bad, bad
        assert out.verdict == verdict, report["summary"]
        assert report["meta"]["status"] == "complete"
        assert report["meta"]["engine"] == "vllm"
        assert host.run(["git", "-C", sb.repo, "status", "--porcelain=v1", "-uall"]).stdout == status
    finally:
        host.close()
        sb.remove()
