"""`runs` and `scenarios list` piped: one tab-separated line per row, every field whole (no 1-character columns)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _piped(args: list[str], tmp_path: Path) -> list[list[str]]:
    env = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path / "sdhome"), "XDG_CONFIG_HOME": str(tmp_path),
           "COLUMNS": "60"}
    proc = subprocess.run([sys.executable, "-m", "specdoctor", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [line.split("\t") for line in proc.stdout.splitlines()]


def test_scenarios_list_piped_is_whole_rows(tmp_path: Path) -> None:
    rows = _piped(["scenarios", "list"], tmp_path)
    assert rows[0] == ["scenario", "box", "sglang", "description"]
    seed = next(r for r in rows if r[0] == "sim:seed")
    assert len(seed) == 4 and len(seed[3]) > 60  # the description whole, on its one line


def test_runs_piped_is_whole_rows(tmp_path: Path) -> None:
    from specdoctor.engine.runs import RunRecord

    home = tmp_path / "sdhome" / "runs"
    home.mkdir(parents=True)
    out = str(tmp_path / "a-rather-long-output-folder-name" / "20991231-235959-abc123")
    rec = RunRecord(run_id="20991231-235959-abc123", host="root@gpu-box.example.com", reopen="x",
                    playbook="regression", out_dir=out, checkpoint="")
    (home / f"{rec.run_id}.json").write_text(rec.model_dump_json())
    rows = _piped(["runs"], tmp_path)
    assert rows[0] == ["run", "started", "host", "playbook", "status", "verdict", "out"]
    assert rows[1][0] == rec.run_id and rows[1][2] == "root@gpu-box.example.com" and rows[1][-1] == out
