"""SIGKILL the controller mid-bisection; `specdoctor resume RUN_ID` finishes with the same verdict, tree restored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from specdoctor.sim import build_sandbox, load_scenario
from specdoctor.sim.sandbox import Sandbox

CLI = [sys.executable, "-m", "specdoctor.cli"]


def _tree(repo: str) -> tuple[str, str, str]:
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True, check=True).stdout

    return git("status", "--porcelain=v1", "-uall"), git("diff", "HEAD"), git("stash", "list")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"

def _trial_server_started(tmp: Path) -> bool:
    """The run has recorded a server it started (a slow box can be between a trial's tree and its launch)."""
    for rec_path in (tmp / "home" / "runs").glob("*.json"):
        try:
            rec = json.loads(rec_path.read_text())
            box = Sandbox.attach(Path(rec["reopen"].split("attach=", 1)[1]))
        except Exception:  # noqa: BLE001 - the record is still being written: look again
            return False
        started = Path(box.base_env["HOME"]) / ".specdoctor" / "runs" / rec["run_id"] / "started.json"
        return started.exists() and bool(started.read_text().strip())
    return False



def test_sigkill_mid_bisection_then_resume(tmp_path, monkeypatch):
    env = {**os.environ, "SPECDOCTOR_HOME": str(tmp_path / "home"), "LANGGRAPH_STRICT_MSGPACK": "true"}
    out = tmp_path / "out"
    reference = build_sandbox(load_scenario("single-culprit"), start_server=False)
    expected = _tree(reference.repo)
    reference.remove()

    errlog = tmp_path / "investigate.err"
    with errlog.open("wb") as err:
        proc = subprocess.Popen([*CLI, "investigate", "--host", "sim:single-culprit", "--yes", "--out", str(out),
                                 "--json"], env=env, stdout=subprocess.DEVNULL, stderr=err)
    audit = out / "audit.jsonl"
    deadline = time.monotonic() + 240
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        if audit.exists() and "trial-" in audit.read_text(errors="replace") and _trial_server_started(tmp_path):
            time.sleep(0.3)  # inside a trial: patches applied, its server recorded as started (started.json)
            proc.send_signal(signal.SIGKILL)
            killed = True
            break
        time.sleep(0.1)
    proc.wait(timeout=30)
    assert killed, f"never reached the bisection: {errlog.read_text()[-2000:]}"

    records = list((tmp_path / "home" / "runs").glob("*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    assert rec["status"] == "running"
    sandbox = Sandbox.attach(Path(rec["reopen"].split("attach=", 1)[1]))
    started = Path(sandbox.base_env["HOME"]) / ".specdoctor" / "runs" / rec["run_id"] / "started.json"
    ours = [json.loads(line)["pgid"] for line in started.read_text().splitlines() if line.strip()]

    # Resume in this process so the sandbox can be inspected after the host closes (keep it, stop its servers).
    from specdoctor.engine.runner import resume
    from specdoctor.sim.host import SimHost

    monkeypatch.setenv("SPECDOCTOR_HOME", env["SPECDOCTOR_HOME"])
    monkeypatch.setattr(SimHost, "close", lambda self: self.sandbox.stop_all())
    try:
        outcome = resume(rec["run_id"]).model_dump()
        assert _tree(sandbox.repo) == expected, "the working tree is not what it was before the run"
    finally:
        sandbox.stop_all()
        sandbox.remove()
    assert outcome["verdict"] == "code-regression" and outcome["status"] == "finished"
    report = json.loads(Path(outcome["files"]["json"]).read_text())
    assert report["stash"]["culprits"] == ["python/sglang/srt/speculative/eagle_worker.py"]
    assert not any(_alive(pgid) for pgid in ours), "a server specdoctor started survived"
    assert expected[1]  # the reference tree really has local patches
