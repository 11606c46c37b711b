"""`specdoctor breakeven` end to end: the real console script, its table, its JSON and its errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from pydantic import TypeAdapter

from specdoctor.tools.breakeven.breakeven import BreakevenAnalysis


def _cli(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("specdoctor", path=str(Path(sys.executable).parent))
    argv = [exe] if exe else [sys.executable, "-c", "from specdoctor.cli import main; main()"]
    return subprocess.run([*argv, "breakeven", *args], capture_output=True, text=True, timeout=60,
                          env={"COLUMNS": "160", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("args", [["--baseline-tps", "82", "--spec-tps", "60", "--accept-len", "1.8"],
                                  ["--decode-ms", "12.2", "--verify-ms", "29", "--draft-ms", "0.5", "--steps", "2"]])
def test_seed_numbers_json_validates_against_schema(args):
    out = _cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    jsonschema.validate(data, BreakevenAnalysis.model_json_schema())  # mcp depends on jsonschema
    model = TypeAdapter(BreakevenAnalysis).validate_python(data)
    assert abs(model.tau_star - 2.46) <= 0.01
    assert set(data) == set(BreakevenAnalysis.model_json_schema()["properties"])
    assert model.targets[0].alpha_needed is not None


def test_table_shows_tau_star_and_alpha_needed():
    out = _cli("--baseline-tps", "82", "--spec-tps", "60", "--accept-len", "1.8")
    assert out.returncode == 0, out.stderr
    assert "break-even τ*" in out.stdout and "2.46" in out.stdout
    assert "α needed" in out.stdout and "0.808" in out.stdout
    assert "speculation loses" in out.stdout


@pytest.mark.parametrize("args,needle", [(["--spec-tps", "60"], "--baseline-tps or --decode-ms"),
                                         (["--baseline-tps", "-1", "--spec-tps", "60"], "--baseline-tps"),
                                         (["--verify-point", "x"], "N:MS")])
def test_bad_input_one_line_no_traceback(args, needle):
    out = _cli(*args)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2
