"""A kill after a step's results were saved but before the next checkpoint: `resume` finishes the run.

LangGraph saves a finished step's writes first and the checkpoint that names the next step after; a SIGKILL in
between leaves a state whose `next` is empty while the step's task still holds its writes. `resume` used to read
that as "already finished" and refuse (seen in the kill campaign on the twin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# The controller, dying (os._exit: no clean-up, like SIGKILL) right after its Nth step's writes were saved, before
# the checkpoint that follows them.
_CRASHING_CLI = """
import os, sys
from langgraph.checkpoint.sqlite import SqliteSaver
calls = {"n": 0}
real = SqliteSaver.put_writes
def put_writes(self, *a, **k):
    real(self, *a, **k)
    calls["n"] += 1
    if calls["n"] == int(os.environ["CRASH_AFTER_WRITES"]):
        os._exit(137)
SqliteSaver.put_writes = put_writes
from specdoctor.cli import main
sys.argv = ["specdoctor", *sys.argv[1:]]
main()
"""


def test_resume_after_a_kill_between_a_steps_writes_and_the_next_checkpoint(tmp_path, monkeypatch):
    home = tmp_path / "home"
    env = {**os.environ, "SPECDOCTOR_HOME": str(home), "LANGGRAPH_STRICT_MSGPACK": "true", "CRASH_AFTER_WRITES": "3"}
    proc = subprocess.run([sys.executable, "-c", _CRASHING_CLI, "investigate", "--host", "sim:gate-leak",
                           "--playbook", "gate-audit", "--yes", "--out", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 137, proc.stdout[-2000:] + proc.stderr[-2000:]
    rec = json.loads(next((home / "runs").glob("*.json")).read_text())
    assert rec["status"] == "running"

    monkeypatch.setenv("SPECDOCTOR_HOME", str(home))
    from specdoctor.engine.graph import compile_playbook
    from specdoctor.engine.playbook_check import load_playbook
    from specdoctor.engine.runner import resume
    from specdoctor.engine.runs import load_record, open_checkpointer
    from specdoctor.sim.host import SimHost
    from specdoctor.sim.sandbox import Sandbox

    sandbox = Sandbox.attach(Path(rec["reopen"].split("attach=", 1)[1]))  # the crashed run left it running
    monkeypatch.setattr(SimHost, "close", lambda self: self.sandbox.stop_all())
    try:
        r = load_record(rec["run_id"])
        with open_checkpointer(r.checkpoint or None) as saver:
            snap = compile_playbook(load_playbook(r.playbook), checkpointer=saver).get_state(
                {"configurable": {"thread_id": r.run_id}})
        assert not snap.next and snap.tasks  # the state this test is about: a step's writes, no next checkpoint
        done_before = set(snap.values.get("done") or [])
        outcome = resume(rec["run_id"], yes=True)
    finally:
        sandbox.stop_all()
        sandbox.remove()
    assert outcome.status == "finished", outcome
    report = json.loads(Path(outcome.files["json"]).read_text())
    steps = {d["step"] for d in report["decisions"]}
    assert "conclude" in steps and steps > done_before  # it went on past the step that had saved its writes
