"""Report diff: verdicts, measurements judged by the comparator, fingerprint changes; and the CLI commands."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from specdoctor.cli import app
from specdoctor.report import diff_reports, write_report
from specdoctor.report.diff import flatten

from .report_builders import code_regression_report, seed_report


def test_diff_finds_shifted_measurement_and_fingerprint_change() -> None:
    a, b = seed_report(seed=1), seed_report(seed=2)
    assert b.fingerprint is not None
    b.fingerprint.current["nccl"] = "2.26.2"
    b.fingerprint.current["gpu"] = {"clock_mhz": 1800}
    spec = b.measurements[1]
    spec.samples = [x - 6.0 for x in spec.samples]
    spec.median = (spec.median or 0) - 6.0
    d = diff_reports(a, b)
    by_label = {m.label: m for m in d.measurements}
    assert by_label["eagle3 k=2 (full tree)"].outcome == "DIFFERENT"
    assert -12.0 < (by_label["eagle3 k=2 (full tree)"].pct_change or 0) < -8.0
    assert by_label["baseline (full tree)"].outcome in ("SAME", "UNKNOWN")
    assert not d.verdict_changed
    keys = {c.key: c for c in d.fingerprint}
    assert keys["nccl"].before == "2.27.3" and keys["nccl"].after == "2.26.2" and keys["nccl"].impact == "high"
    assert keys["gpu.clock_mhz"].before is None and keys["gpu.clock_mhz"].after == "1800"
    assert d.fingerprint[0].impact == "high"                       # ranked by impact


def test_diff_of_different_scenarios() -> None:
    d = diff_reports(seed_report(), code_regression_report())
    assert d.verdict_changed and d.verdict_a == "baseline-not-reproducible" and d.verdict_b == "code-regression"
    assert "baseline (full tree)" in [m.label for m in d.measurements]
    assert "eagle3 k=2 (full tree)" in d.only_in_a
    assert d.top_action_a != d.top_action_b
    assert "baseline-not-reproducible -> code-regression" in d.summary_line()


def test_flatten() -> None:
    assert flatten({"a": {"b": 1, "c": None}, "d": [1, 2]}) == {"a.b": "1", "a.c": None, "d": "1, 2"}


def test_cli_show_diff_schema(tmp_path: Path) -> None:
    write_report(seed_report(seed=1), tmp_path / "a")
    write_report(code_regression_report(), tmp_path / "b")
    runner = CliRunner()
    res = runner.invoke(app, ["report", "show", str(tmp_path / "a")], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    assert "baseline-not-reproducible" in res.output and "Game plan" in res.output
    assert "SGLANG_OEA_K0" in res.output and "hf_abcdefghijklmnop" not in res.output
    res = runner.invoke(app, ["report", "show", str(tmp_path / "a"), "--section", "breakeven"])
    assert res.exit_code == 0 and "2.46" in res.output and "Suspects" not in res.output
    res = runner.invoke(app, ["report", "show", str(tmp_path / "a"), "--section", "nope"])
    assert res.exit_code != 0
    res = runner.invoke(app, ["report", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["verdict_changed"] is True and data["verdict_b"] == "code-regression"
    res = runner.invoke(app, ["report", "diff", str(tmp_path / "a"), str(tmp_path / "b")], env={"COLUMNS": "160"})
    assert res.exit_code == 0 and "DIFFERENT" in res.output
    res = runner.invoke(app, ["report", "schema"])
    assert res.exit_code == 0 and json.loads(res.output)["properties"]["verdict"]
