"""The user's server holds the GPUs (memory enforced on the twin): stop it only with consent, bring it back exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate, resume
from specdoctor.models import UserServerFact
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.sim.sandbox import Sandbox
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.serving.port_hold import holders

PLAYBOOK = str(Path(__file__).with_name("gpu_ownership.yaml"))
PATCH_PLAYBOOK = str(Path(__file__).with_name("gpu_ownership_patches.yaml"))  # + backup, subtract, restore
CLI = [sys.executable, "-m", "specdoctor.cli"]


def _box(name: str = "no-regression", *, enforce: bool = True, supervisor: str | None = None,
         install: str | None = None) -> Sandbox:
    sc = load_scenario(name)
    # A 70B-class target (140 GB over the TP ranks): it cannot load beside a server holding most of each card.
    update: dict[str, Any] = {"gpu_memory": sc.gpu_memory.model_copy(update={"enforce": enforce, "weights_gb": 140.0})}
    if supervisor:
        update["server"] = sc.server.model_copy(update={"supervisor": supervisor})
    if install:
        update["sglang"] = sc.sglang.model_copy(update={"install": install})
    return build_sandbox(sc.model_copy(update=update))


def _main_pid(box: Sandbox) -> int:
    host = SimHost(box)
    found = registry.call(ToolContext(host=host, run_id="probe"), "find_server_processes",
                          {"port": box.port, "exactly_one": True})
    assert found.ok, found.summary
    return int(found.output["servers"][0]["main"]["pid"])


def _run(box: Sandbox, tmp_path: Path, *, yes: bool, approver=None, playbook: str = PLAYBOOK
         ) -> tuple[dict[str, Any], Any]:
    out = tmp_path / "out"
    outcome = investigate(InvestigateOptions(host=f"sim:{box.scenario.name}", playbook=playbook, yes=yes,
                                             out=str(out), port=box.port), host=SimHost(box), approver=approver)
    return json.loads((out / "report.json").read_text()), outcome


def _decision(report: dict[str, Any], step: str) -> dict[str, Any]:
    return next(d for d in report["decisions"] if d["step"] == step)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))


def test_launching_beside_the_running_server_fails_the_real_way(tmp_path):
    """The old behaviour (a second server beside the user's) cannot pass on the twin: SGLang's failure, non-zero."""
    box = _box()
    try:
        res = registry.call(ToolContext(host=SimHost(box), run_id="beside", auto_approve=True), "launch_server",
                            {"command": box.launch, "port": 0, "label": "beside", "timeout_s": 60})
        # the launch tool sees the exit or, first, SGLang's traceback in the log (a race of who is quicker)
        assert not res.ok and ("exited" in res.summary or "fatal line" in res.summary), res.summary
        assert "CUDA out of memory" in res.summary or "Not enough memory" in res.summary
    finally:
        box.remove()


def test_stop_with_consent_trials_then_restart_exactly(tmp_path):
    box = _box()
    try:
        pid = _main_pid(box)
        report, outcome = _run(box, tmp_path, yes=True)
        facts = outcome.results
        assert facts["free_gpus"]["status"] == "ok"  # stop_user_server's own result
        fact = UserServerFact.model_validate(_user_server_fact(tmp_path))
        assert fact.stopped and fact.stop_consent == "yes-flag" and fact.restarted and fact.healthy
        assert fact.port_held and "held for it" in _decision(report, "free_gpus")["found"]
        assert holders(SimHost(box), box.port) == []  # released before the restart took the port back
        assert fact.pid_before == pid and fact.pid_after not in (None, pid)
        assert fact.identity_after == fact.identity_before  # argv, full env, cwd, user as they were
        assert fact.outcome == "SAME" and fact.left_as_found
        # The baseline was launched on the freed GPUs (it would OOM beside the user's server: test above).
        assert "baseline" in _decision(report, "reproduce")["found"] and _decision(report, "reproduce")["status"] == "ok"
        assert _healthy(box.port) and _main_pid(box) == fact.pid_after
        log = Path(box.server_log).read_text()
        assert log.count("The server is fired up") == 2  # its own log file, appended to by the restart
    finally:
        box.remove()


def _user_server_fact(tmp_path: Path) -> dict[str, Any]:
    """The user_server fact as the run's last checkpoint holds it (the report renders it)."""
    return _values()["facts"]["user_server"]


def _values() -> dict[str, Any]:
    """The last run's state as its last checkpoint holds it."""
    from specdoctor.engine.graph import compile_playbook
    from specdoctor.engine.playbook_check import load_playbook
    from specdoctor.engine.runs import list_records, open_checkpointer

    rec = list_records()[-1]
    with open_checkpointer(rec.checkpoint or None) as saver:
        app = compile_playbook(load_playbook(rec.playbook), checkpointer=saver)
        return dict(app.get_state({"configurable": {"thread_id": rec.run_id}}).values)


def test_without_consent_only_the_read_only_part_runs(tmp_path):
    box = _box()
    try:
        pid = _main_pid(box)
        asked: list[str] = []
        report, _ = _run(box, tmp_path, yes=False, approver=lambda payload: asked.append(payload["step"]) or False)
        assert asked == ["free_gpus"]  # asked once; the launching steps are skipped, not asked
        assert _decision(report, "free_gpus")["status"] == "declined"
        repro = _decision(report, "reproduce")
        assert repro["status"] == "skipped" and "not approved" in repro["found"]
        assert _decision(report, "user_server")["status"] == "ok"  # the examination and its benchmark ran
        assert report["measurements"]  # the running server's throughput, measured read-only
        assert _main_pid(box) == pid and _healthy(box.port)  # untouched
        # What the report is built from: the run's values after the runner's cleanup.
        from specdoctor.engine.actions.user_server import cleanup_user_server

        values = cleanup_user_server(ToolContext(host=SimHost(box), run_id="x"), _values())
        fact = UserServerFact.model_validate(values["facts"]["user_server"])
        assert fact.stop_consent == "refused" and not fact.stopped and fact.left_as_found
    finally:
        box.remove()


def test_a_supervised_server_is_detected_and_never_fought(tmp_path):
    box = _box(supervisor="restarter")
    try:
        pid = _main_pid(box)
        report, _ = _run(box, tmp_path, yes=True)
        found = _decision(report, "user_server")
        assert "restarter" in found["found"] and "never fights a supervisor" in found["decided"]
        stop = _decision(report, "free_gpus")
        assert stop["status"] == "skipped" and "restarter" in stop["found"]
        assert _decision(report, "reproduce")["status"] == "skipped"
        assert _main_pid(box) == pid
    finally:
        box.remove()


def test_a_server_importing_sglang_from_site_packages_skips_the_patch_steps(tmp_path):
    box = _box(install="wheel")  # no-regression: a stock server that starts without the checkout's patches
    try:
        report, _ = _run(box, tmp_path, yes=True, playbook=PATCH_PLAYBOOK)
        origin = [d for d in report["decisions"] if d["title"] == "Where the running server imports sglang from"]
        assert origin and "site-packages" in origin[0]["found"] and "CANNOT EXPLAIN" in origin[0]["decided"]
        for step in ("backup", "subtract"):
            d = _decision(report, step)
            assert d["status"] == "skipped" and "not from the --repo checkout" in d["found"], d
    finally:
        box.remove()


def test_the_editable_checkout_is_recognised(tmp_path):
    """The case where the origin rule must NOT fire: `pip install -e` of the checkout (PEP 610 record)."""
    box = _box("single-culprit")
    try:
        report, _ = _run(box, tmp_path, yes=True)
        origin = [d for d in report["decisions"] if d["title"] == "Where the running server imports sglang from"]
        assert origin and "patches are what the server runs" in origin[0]["decided"]
    finally:
        box.remove()


def _kill_after_stop(tmp_path: Path, box: Sandbox) -> str:
    """Run investigate in a child; SIGKILL it once the user's server is stopped and a trial is launching."""
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    out = tmp_path / "out"
    proc = subprocess.Popen([*CLI, "investigate", "--host", f"sim:attach={box.root}", "--playbook", PLAYBOOK,
                             "--yes", "--out", str(out), "--port", str(box.port), "--json",
                             # long benchmark runs: the trial lasts seconds, a window to kill the run inside it
                             "--param", "runs=10", "--param", "max_new_tokens=1024"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    audit = out / "audit.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        text = audit.read_text(errors="replace") if audit.exists() else ""
        if "kill -TERM" in text and "setsid nohup" in text and "setsid nohup env -i" not in text:  # a trial, not the restart
            time.sleep(0.5)  # inside the trial (its benchmark lasts seconds), as test_resume_after_kill does
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed mid-trial"
    assert not _healthy(box.port)  # the user's server is down: the crash left it stopped
    records = list((Path(os.environ["SPECDOCTOR_HOME"]) / "runs").glob("*.json"))
    return json.loads(records[0].read_text())["run_id"]


def test_crash_then_resume_brings_the_users_server_back(tmp_path, monkeypatch):
    box = _box()
    try:
        before = _main_pid(box)
        run_id = _kill_after_stop(tmp_path, box)
        monkeypatch.setattr(SimHost, "close", lambda self: None)  # keep the sandbox to look at it afterwards
        resume(run_id, yes=True)
        assert _healthy(box.port) and _main_pid(box) != before
        fact = UserServerFact.model_validate(_user_server_fact(tmp_path))
        assert fact.restarted and fact.identity_after == fact.identity_before
    finally:
        box.remove()


def test_crash_then_restore_brings_the_users_server_back(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from specdoctor.cli import app

    box = _box()
    try:
        run_id = _kill_after_stop(tmp_path, box)
        # the crash left the port held for the user's server: nothing else binds it, a client is told why
        r = httpx.get(f"http://127.0.0.1:{box.port}/health", timeout=5)
        assert r.status_code == 503 and run_id in r.text
        monkeypatch.setattr(SimHost, "close", lambda self: None)  # `restore` on a sim host would remove the box
        res = CliRunner().invoke(app, ["restore", "--host", f"sim:attach={box.root}", "--repo", box.repo])
        assert res.exit_code == 0, res.output[-1500:]
        assert "your server stopped by run" in res.output and "identity unchanged" in res.output
        assert _healthy(box.port)
        again = CliRunner().invoke(app, ["restore", "--host", f"sim:attach={box.root}", "--repo", box.repo])
        assert "your server stopped by run" not in again.output  # brought back once, never twice
    finally:
        box.remove()


def test_ctrl_c_mid_run_brings_the_users_server_back(tmp_path, monkeypatch):
    import dataclasses

    from specdoctor.engine.actions.catalogue import ACTIONS

    def interrupted(*_: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C while a trial runs on the freed GPUs

    monkeypatch.setitem(ACTIONS, "reproduce", dataclasses.replace(ACTIONS["reproduce"], fn=interrupted))
    box = _box()
    try:
        before = _main_pid(box)
        with pytest.raises(KeyboardInterrupt):
            _run(box, tmp_path, yes=True)
        assert _healthy(box.port) and _main_pid(box) != before  # restarted by the runner's cleanup
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        back = [d for d in report["decisions"] if d["step"] == "cleanup" and "back on" in d["found"]]
        assert back and "identity unchanged" in back[0]["found"]
    finally:
        box.remove()
