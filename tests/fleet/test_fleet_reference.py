"""`investigate --reference fleet:RUN`: bad references are one-line errors (the good path: test_fleet_survey)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SPECDOCTOR = str(Path(sys.executable).with_name("specdoctor"))


def test_bad_references_are_one_line_errors(tmp_path):
    env = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path)}
    cases = [(["--host", "sim:seed", "--reference", "fleet:x"], "sim: host"),
             (["--host", "u@127.0.0.1:1", "--reference", "fleet:", "--checkpoint", str(tmp_path / "s.sqlite")],
              "fleet:RUN"),
             (["--host", "u@127.0.0.1:1", "--reference", "fleet:nope", "--checkpoint", str(tmp_path / "s.sqlite")],
              "no survey 'nope'")]
    for args, words in cases:
        res = subprocess.run([SPECDOCTOR, "investigate", *args], capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode == 2, res.stderr
        assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
