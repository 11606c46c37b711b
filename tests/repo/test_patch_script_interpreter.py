"""The user's patch script runs the way its own `#!` line asks (real H200 first contact: a bash script was run as
`python3 script.sh`, died with SyntaxError, and voided the subtraction)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from specdoctor.host import LocalHost
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.patch_script import script_command
from specdoctor.tools.checkout.worktree import ApplyInput, apply_patches, restore

REAL = Path(__file__).resolve().parents[1] / "fixtures/sglang-0.5.17-h200/patch-script"
SCHED = "python/sglang/srt/managers/scheduler.py"


def _ctx() -> ToolContext:
    return ToolContext(host=LocalHost(), run_id="pscript", auto_approve=True)


def test_the_real_bash_patch_script_runs_under_bash_in_the_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "home"))
    repo = tmp_path / "sglang"
    (repo / "python/sglang/srt/managers").mkdir(parents=True)
    (repo / SCHED).write_text("class Scheduler:\n    def init_model_worker(self):\n        pass\n")
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit",
                                                             "-qm", "v0.5.17"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True)
    (repo / "local.txt").write_text("a local change\n")  # a change to back up, as a user's checkout has
    script = tmp_path / "apply_local_patches.sh"
    script.write_text((REAL / "apply_local_patches.sh").read_text())
    assert "SyntaxError" in (REAL / "python3-run.stderr").read_text()  # what running it with python3 gave
    ctx = _ctx()
    out = apply_patches(ctx, ApplyInput(repo=str(repo), script=str(script), python=sys.executable))
    assert out.script_exit == 0, out.script_output
    assert "APPLIED scheduler log line" in out.script_output and "SyntaxError" not in out.script_output
    assert [a.kind for a in out.ambiguous] == ["WARN"]  # its own WARN line, quoted, and nothing else
    assert 'logger.info("local patch: init_model_worker")' in (repo / SCHED).read_text()
    assert [c.path for c in out.script_changed] == [SCHED]
    assert restore(ctx, str(repo), ctx.run_id).verified


def test_the_interpreter_follows_the_first_line(tmp_path):
    ctx = _ctx()
    cases = {"a.sh": ("#!/usr/bin/env bash\necho hi\n", ["/usr/bin/env", "bash"]),
             "b": ("#!/bin/sh -e\necho hi\n", ["/bin/sh", "-e"]),
             "c.py": ("#!/usr/bin/env python3\nprint(1)\n", ["PY"]),  # a python script: the server's interpreter
             "d": ("#!/opt/venv/bin/python3.12 -u\nprint(1)\n", ["PY"]),
             "e.py": ("print(1)\n", ["PY"]),  # no #!: as before
             "f.sh": ("echo hi\n", ["bash"]), "g.bash": ("echo hi\n", ["bash"])}
    for name, (text, want) in cases.items():
        (tmp_path / name).write_text(text)
        argv = script_command(ctx, str(tmp_path / name), "PY", ["TREE"])
        assert argv == [*want, str(tmp_path / name), "TREE"], name
    assert script_command(ctx, str(tmp_path / "missing"), "PY", []) == ["PY", str(tmp_path / "missing")]  # unreadable
