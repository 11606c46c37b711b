"""`specdoctor.investigate(...)`: a whole playbook from Python; its report is what MCP serves as the latest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specdoctor
from specdoctor.embed.mcp_server import latest_report
from specdoctor.errors import UsageError


def test_investigate_writes_the_report_that_mcp_serves(tmp_path: Path, home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDOCTOR_HOME", str(home / ".specdoctor"))
    runs = tmp_path / "runs"
    outcome = specdoctor.investigate("sim:seed", playbook="gate-audit", out=str(runs / "gates"))
    assert outcome.status == "finished" and Path(outcome.out_dir) == (runs / "gates").resolve()
    assert {"json", "md", "html"} <= set(outcome.files) and all(Path(p).is_file() for p in outcome.files.values())
    report = json.loads(Path(outcome.files["json"]).read_text())
    assert report["meta"]["host"] == "sim:seed" and report["meta"]["playbook"] == "gate-audit"
    assert report["verdict"] == outcome.verdict
    monkeypatch.setenv("SPECDOCTOR_RUNS", str(runs))
    assert latest_report() == Path(outcome.files["json"])


def test_investigate_rejects_unknown_options(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no_such_option"):
        specdoctor.investigate("sim:seed", no_such_option=1)
    with pytest.raises(UsageError):
        specdoctor.investigate("", out=str(tmp_path / "never"))
    assert list(tmp_path.iterdir()) == []  # failed before writing anything


def test_investigate_asks_before_it_changes_the_box_as_the_cli_does(tmp_path: Path, home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """No `yes=True`, no approver: every mutating or disruptive step is declined (as the CLI declines it when
    nobody answers its prompt); the user's server keeps running and the tree is never stashed."""
    monkeypatch.setenv("SPECDOCTOR_HOME", str(home / ".specdoctor"))
    outcome = specdoctor.investigate("sim:seed", out=str(tmp_path / "run"))
    assert outcome.status == "finished", outcome
    report = json.loads(Path(outcome.files["json"]).read_text())
    declined = {d["step"] for d in report["decisions"] if d["status"] == "declined"}
    assert {"free_gpus", "backup"} <= declined, declined
    server = (report.get("box") or {}).get("server") or {}
    assert not server.get("stopped"), server  # never stopped without consent
