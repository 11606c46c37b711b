"""Ctrl-C in a real terminal (tmux): the screen names the run, what the clean-up did and the exact resume command;
then `specdoctor resume` finishes the run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdoctor.sim import build_sandbox, load_scenario

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


def _trial_started(root: Path) -> bool:
    """A trial tree exists: a subtraction or bisection trial is on, the user's server is down."""
    trees = root / "home" / ".specdoctor" / "trees"
    return trees.is_dir() and any(d.is_dir() for run in trees.iterdir() if run.is_dir() for d in run.iterdir())


class Terminal:
    """One tmux session on a private server socket (never the user's tmux)."""

    def __init__(self, tmp: Path):
        self.sock = str(tmp / "tmux.sock")
        self.name = "sd"

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-s", self.name, "-x", "160", "-y", "50", command)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-500", "-t", self.name)

    def wait_for(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            if re.search(pattern, text):
                return text
            time.sleep(0.5)
        pytest.fail(f"{pattern!r} never showed; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True, timeout=30)


def test_ctrl_c_in_a_terminal_says_run_cleanup_and_resume_then_resume_finishes(tmp_path: Path) -> None:
    sandbox = build_sandbox(load_scenario("seed"), tmp_path / "box")
    term = Terminal(tmp_path)
    env = {"SPECDOCTOR_HOME": str(tmp_path / "sdhome"), "TERM": "xterm-256color",
           "PATH": os.environ.get("PATH", "")}
    cli = [sys.executable, "-m", "specdoctor"]
    run = [*cli, "investigate", "--host", f"sim:attach={sandbox.root}", "--yes", "--out", str(tmp_path / "out")]
    command = (f"cd {shlex.quote(str(tmp_path))} && env {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} "
               f"{shlex.join(run)}; echo EXIT=$?; sleep 600")
    try:
        term.start(command)
        deadline = time.monotonic() + 300
        while not _trial_started(sandbox.root):
            assert time.monotonic() < deadline, f"no trial began; the screen:\n{term.screen()}"
            assert "EXIT=" not in term.screen(), term.screen()
            time.sleep(0.2)
        term.tmux("send-keys", "-t", term.name, "C-c")
        screen = term.wait_for(r"EXIT=\d+", timeout=240)
    finally:
        term.close()
    assert "EXIT=130" in screen, screen
    assert "Traceback" not in screen, screen
    said = re.search(r"specdoctor: run (\S+) interrupted at step (\d+) of (\d+)", screen)
    assert said, screen
    run_id = said.group(1)
    assert f"continue with: specdoctor resume {run_id}" in screen, screen
    assert re.search(r"clean-up: restored and verified", screen), screen  # the trial's tree put back
    assert re.search(r"clean-up: box left as found(, not fully verified)?: .*server back on :\d+, same identity .*throughput"
                     r".*checkout manifest identical", screen), screen
    report = (tmp_path / "out" / "report.md").read_text().replace("\\`", "`")  # markdown escapes backticks
    assert f"`specdoctor resume {run_id}` continues the run" in report  # the partial report says the same
    assert "box left as found" in report.lower()

    env_resume = {**os.environ, **env}
    proc = subprocess.run([*cli, "resume", run_id], cwd=tmp_path, env=env_resume, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(rf"resuming run {run_id} at step \d+ of \d+", proc.stderr), proc.stderr[-3000:]
    assert "carries over" in proc.stderr, proc.stderr[-3000:]  # started with --yes: said, and why
    assert "verdict: baseline-not-reproducible" in proc.stdout, proc.stdout
    record = json.loads((tmp_path / "sdhome" / "runs" / f"{run_id}.json").read_text())
    assert record["status"] == "finished"
    sandbox.remove()
