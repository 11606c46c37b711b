"""Controller SIGINT / SIGKILL mid-run on the twin: partial report on SIGINT; resume after SIGKILL restores all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdoctor.host import LocalHost
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.manifest import take_manifest


def _start(tmp: Path, root: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPECDOCTOR_HOME": str(tmp / "sdhome"), "COLUMNS": "100"}
    return subprocess.Popen([sys.executable, "-m", "specdoctor.cli", "investigate", "--host", f"sim:attach={root}",
                             "--yes", "--out", str(tmp / "out")], env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    """A shell's background job starts with SIGINT ignored; a user's terminal delivers it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_trial(root: Path, proc: subprocess.Popen[bytes], timeout: float = 240) -> None:
    """Until a trial tree exists (a subtraction or bisection trial is on): the worst moment to lose the controller."""
    trees = root / "home" / ".specdoctor" / "trees"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        if trees.is_dir() and any(d.is_dir() for run in trees.iterdir() if run.is_dir() for d in run.iterdir()):
            return
        time.sleep(0.1)
    pytest.fail("the run never built a trial tree")


@pytest.fixture()
def sandbox(tmp_path: Path):
    sb = build_sandbox(load_scenario("seed"), tmp_path / "box")
    try:
        yield sb
    finally:
        sb.remove()


def test_sigint_mid_run_writes_a_partial_report_after_putting_the_tree_back(tmp_path: Path, sandbox, monkeypatch):
    proc = _start(tmp_path, sandbox.root)
    _wait_for_trial(sandbox.root, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "Traceback" not in (out + err).decode()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert err.decode().strip().splitlines()[-1] == f"continue with: specdoctor resume {report['meta']['run_id']}"
    text = json.dumps(report)
    assert "interrupted (SIGINT)" in text and report["verdict"] == "inconclusive"
    assert "restored and verified" in text  # the safety net ran before the process exited
    # ...and the interrupted run can be resumed to its verdict (the sandbox was left in place for it)
    record = json.loads(next((tmp_path / "sdhome" / "runs").glob("*.json")).read_text())
    assert record["status"] == "interrupted"
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))
    monkeypatch.setattr(SimHost, "close", lambda self: None)
    from specdoctor.engine.runner import resume

    outcome = resume(record["run_id"], yes=True)
    assert outcome.status == "finished" and outcome.verdict == "baseline-not-reproducible", outcome


def test_sigkill_mid_run_then_resume_restores_byte_identical_and_stops_its_servers(tmp_path: Path, sandbox,
                                                                                  monkeypatch):
    host = LocalHost(base_env=sandbox.base_env, inherit_env=False)
    ctx = ToolContext(host=host, run_id="check")
    before = take_manifest(ctx, sandbox.repo)
    proc = _start(tmp_path, sandbox.root)
    _wait_for_trial(sandbox.root, proc)
    proc.kill()
    proc.communicate(timeout=30)
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))
    monkeypatch.setattr(SimHost, "close", lambda self: None)  # keep the sandbox to compare afterwards
    from specdoctor.engine.runner import resume

    run_id = next((tmp_path / "sdhome" / "runs").glob("*.json")).stem
    outcome = resume(run_id, yes=True)
    assert outcome.status == "finished" and outcome.verdict == "baseline-not-reproducible", outcome
    diff = before.diff(take_manifest(ctx, sandbox.repo))
    assert diff.same, diff.differences  # byte for byte: every path, mode, the index flags, HEAD, stashes
    assert not (sandbox.root / "home" / ".specdoctor" / "trees" / run_id).exists()  # its trial trees are gone
    started = Path(sandbox.root / "home" / ".specdoctor" / "runs" / run_id / "started.json")
    groups = {json.loads(line)["pgid"] for line in started.read_text().splitlines()} if started.exists() else set()
    alive = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _live_pgid(p) in groups]
    assert not alive, alive


def _live_pgid(p: Path) -> int | None:
    try:
        f = p.joinpath("stat").read_text().rsplit(")", 1)[1].split()
        return None if f[0] in ("Z", "X") else int(f[2])
    except (OSError, IndexError, ValueError):
        return None
