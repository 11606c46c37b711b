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
