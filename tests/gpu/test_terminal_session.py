"""A server the user started in tmux (or screen) comes back in its session; a nohup server stays detached."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.models import UserServerFact
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.sim.sandbox import Sandbox
from specdoctor.toolkit import ToolContext, registry

PLAYBOOK = str(Path(__file__).with_name("gpu_ownership.yaml"))


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))


def _box(supervisor: str, running_env: dict[str, str] | None = None) -> Sandbox:
    sc = load_scenario("no-regression")
    # GPU memory enforced and a 70B-class target: the trial cannot start until the user's server is stopped.
    server = sc.server.model_copy(update={"supervisor": supervisor, "running_env": running_env or {}})
    return build_sandbox(sc.model_copy(update={
        "server": server, "gpu_memory": sc.gpu_memory.model_copy(update={"enforce": True, "weights_gb": 140.0})}))


def _main_pid(box: Sandbox) -> int:
    found = registry.call(ToolContext(host=SimHost(box), run_id="probe"), "find_server_processes",
                          {"port": box.port, "exactly_one": True})
    assert found.ok, found.summary
    return int(found.output["servers"][0]["main"]["pid"])


def _investigate(box: Sandbox, tmp_path: Path) -> tuple[dict[str, Any], UserServerFact]:
    out = tmp_path / "out"
    investigate(InvestigateOptions(host=f"sim:{box.scenario.name}", playbook=PLAYBOOK, yes=True, out=str(out),
                                   port=box.port), host=SimHost(box))
    report = json.loads((out / "report.json").read_text())
    back = next(d for d in report["decisions"] if d["step"] == "give_back")
    assert back["status"] == "ok", back
    repro = next(d for d in report["decisions"] if d["step"] == "reproduce")
    assert repro["status"] == "ok", repro  # the trial ran on the freed GPUs
    return back, UserServerFact.model_validate(_last_values()["facts"]["user_server"])


def _last_values() -> dict[str, Any]:
    from specdoctor.engine.graph import compile_playbook
    from specdoctor.engine.playbook_check import load_playbook
    from specdoctor.engine.runs import list_records, open_checkpointer

    rec = list_records()[-1]
    with open_checkpointer(rec.checkpoint or None) as saver:
        app = compile_playbook(load_playbook(rec.playbook), checkpointer=saver)
        return dict(app.get_state({"configurable": {"thread_id": rec.run_id}}).values)


def _stat(pid: int) -> tuple[int, int]:
    """(ppid, pgid) from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[2])


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)


def _tmux(box: Sandbox, *args: str) -> str:
    return subprocess.run(["tmux", "-S", str(box.tmux_socket), *args], capture_output=True, text=True,
                          check=True).stdout


def test_a_server_started_in_tmux_comes_back_in_its_session(tmp_path):
    secret = "hf_" + "Q7" * 17  # a token in its environment: back in the server, never in a command line or log
    box = _box("tmux", running_env={"HF_TOKEN": secret})
    try:
        before = _main_pid(box)
        env_before = _environ(before)
        tmux_pid = _stat(before)[0]
        while not Path(f"/proc/{tmux_pid}/cmdline").read_bytes().startswith(b"tmux"):
            tmux_pid = _stat(tmux_pid)[0]  # the window's shell, then the tmux server
        back, fact = _investigate(box, tmp_path)
        after = _main_pid(box)
        assert fact.pid_before == before and fact.pid_after == after != before
        # In the same tmux server, in a new window of the session the user attaches to.
        panes = _tmux(box, "list-panes", "-a", "-F", "#{pane_pid} #{session_name}:#{window_index} #{pane_id}")
        pane = {line.split()[0]: line.split()[1:] for line in panes.splitlines()}
        assert str(after) in pane, panes
        assert pane[str(after)][0].startswith("sglang:") and pane[str(after)][0] != "sglang:0"
        assert "sglang:0" in {v[0] for v in pane.values()}  # the user's own window (its shell) is still there
        assert _stat(after)[0] == tmux_pid  # a child of that tmux server, not re-parented to init
        env_after = _environ(after)
        assert env_after["TMUX_PANE"] == pane[str(after)][1] != env_before["TMUX_PANE"]  # the new pane's own
        assert env_after["TMUX"].split(",")[:2] == env_before["TMUX"].split(",")[:2]
        assert {k: v for k, v in env_after.items() if not k.startswith("TMUX")} == \
            {k: v for k, v in env_before.items() if not k.startswith("TMUX")}
        assert fact.identity_after == fact.identity_before and fact.outcome == "SAME" and fact.left_as_found
        assert "tmux" in back["found"] and "attach -t sglang" in back["found"] and "detached" not in fact.note
        assert env_after["HF_TOKEN"] == secret
        runs = Path(box.root / "home" / ".specdoctor" / "runs")
        assert runs.is_dir() and not list(runs.rglob(".launch-*"))  # the launcher (full env) deleted itself
        audit = (tmp_path / "out" / "audit.jsonl").read_text()
        assert "new-window" in audit and secret not in audit
        box_line = next(ln for ln in (tmp_path / "out" / "report.md").read_text().splitlines()
                        if "left as found" in ln)
        assert "server back on" in box_line and "attach -t sglang" in box_line, box_line
    finally:
        box.remove()
    assert not box.tmux_socket.exists() or subprocess.run(
        ["tmux", "-S", str(box.tmux_socket), "list-sessions"], capture_output=True).returncode != 0


def _stopped_by_a_crashed_run(box: Sandbox, run_id: str) -> tuple[ToolContext, UserServerFact]:
    """What a run that stopped the user's server and then died leaves: the relaunch file, the pending marker (both
    written by take_gpus's own functions) and the server stopped by stop_user_server."""
    from specdoctor.engine.actions.user_server import Pending, _file_target, _save_pending, host_key
    from specdoctor.engine.runs import Relaunch, save_relaunch
    from specdoctor.tools.serving.user_server import UserServerRecord, capture

    host = SimHost(box)
    ctx = ToolContext(host=host, run_id=run_id, auto_approve=True)
    pid = _main_pid(box)
    rec = registry.typed_output(registry.call(ctx, "inspect_user_server", {"pid": pid, "port": box.port}),
                                UserServerRecord, where="test")
    assert rec is not None and rec.session is not None and rec.session.session == box.scenario.server.session_name
    cap = capture(host, pid)
    save_relaunch(Relaunch(run_id=run_id, argv=cap.argv, env=cap.env, cwd=cap.cwd))
    _save_pending(Pending(run_id=run_id, host=host_key(host), port=box.port, log_path=_file_target(rec.stdout),
                          user=rec.user, supervisor=rec.supervisor, session=rec.session, identity=rec.identity))
    assert registry.call(ctx, "stop_user_server", {"pid": pid, "starttime": cap.starttime}).ok
    return ctx, UserServerFact(pid_before=pid, identity_before=rec.identity)


def test_a_tmux_session_that_ended_is_made_again_under_its_name(tmp_path):
    """The session died with its only window; another session keeps the tmux server up: same name, new session."""
    from specdoctor.engine.actions.user_server import bring_back

    box = _box("tmux")
    try:
        ctx, before = _stopped_by_a_crashed_run(box, "ended")
        _tmux(box, "new-session", "-d", "-s", "other")  # keeps the tmux server up
        _tmux(box, "kill-session", "-t", "=sglang")
        fact, decisions = bring_back(ctx, "ended", timeout_s=60)
        assert fact is not None and fact.restarted, decisions
        panes = _tmux(box, "list-panes", "-a", "-F", "#{pane_pid} #{session_name}")
        assert f"{fact.pid_after} sglang" in panes.splitlines(), panes
        assert fact.identity_after == before.identity_before
    finally:
        box.remove()


def test_when_the_tmux_server_is_gone_it_comes_back_detached_and_says_so(tmp_path):
    from specdoctor.engine.actions.user_server import bring_back

    box = _box("tmux")
    try:
        ctx, before = _stopped_by_a_crashed_run(box, "gone")
        _tmux(box, "kill-server")
        fact, decisions = bring_back(ctx, "gone", timeout_s=60)
        assert fact is not None and fact.restarted and fact.identity_after == before.identity_before, decisions
        assert "restarted detached" in fact.note and "tmux server" in fact.note and "gone" in fact.note
        assert _stat(fact.pid_after)[1] == fact.pid_after  # its own process group (setsid), in no tmux
        assert not {"TMUX", "TMUX_PANE"} & set(_environ(fact.pid_after))  # no variables naming a dead pane
        assert subprocess.run(["tmux", "-S", str(box.tmux_socket), "list-sessions"],
                              capture_output=True).returncode != 0  # no tmux server started behind the user's back
    finally:
        box.remove()


def test_restore_after_a_crash_brings_the_tmux_server_back_in_its_session(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from specdoctor.cli import app

    box = _box("tmux")
    try:
        _stopped_by_a_crashed_run(box, "crashed")
        monkeypatch.setattr(SimHost, "close", lambda self: None)  # `restore` on a sim host would remove the box
        res = CliRunner().invoke(app, ["restore", "--host", f"sim:attach={box.root}", "--repo", box.repo])
        assert res.exit_code == 0, res.output[-1500:]
        assert "identity unchanged" in res.output and "attach -t sglang" in res.output
        after = _main_pid(box)
        assert f"{after} sglang:1" in _tmux(box, "list-panes", "-a", "-F",
                                              "#{pane_pid} #{session_name}:#{window_index}").splitlines()
    finally:
        box.remove()


def test_tmux_or_screen_variables_that_name_no_parent_record_no_session():
    """Must NOT fire: $TMUX/$STY inherited from elsewhere (not a parent of the server) say nothing of where it runs;
    and tmux is asked only when they do."""
    from specdoctor.host.mock import MockHost
    from specdoctor.tools.serving.terminal_session import session_of

    host = MockHost(lambda cmd, env, cwd: "alive" if "screen -ls" in str(cmd) else "serve\t2")
    env = {"TMUX": "/tmp/tmux-1000/default,4242,0", "TMUX_PANE": "%7", "STY": "4343.work", "WINDOW": "1"}
    assert session_of(host, "tmux", env, {900, 4000})[0] is None and not host.calls
    assert session_of(host, "screen", env, {900})[0] is None
    tmux, _ = session_of(host, "tmux", env, {900, 4242})
    assert tmux is not None and (tmux.session, tmux.window, tmux.socket) == ("serve", "2", "/tmp/tmux-1000/default")
    assert tmux.attach_hint() == "tmux attach -t serve"  # tmux's default socket: a plain attach finds it
    screen, _ = session_of(host, "screen", env, {4343})
    assert screen is not None and screen.name == "work" and screen.window == "1"
    assert session_of(host, "nohup", env, {4242, 4343})[0] is None
    unlisted = MockHost(lambda cmd, env, cwd: "server-gone")  # `screen -ls` of this user lacks it (another user's)
    assert session_of(unlisted, "screen", env, {4343})[0] is None


def test_identity_ignores_which_pane_but_not_the_rest_of_the_environment():
    from specdoctor.tools.serving.user_server import identity_hash

    argv = ["python", "-m", "sglang.launch_server"]
    a = identity_hash(argv, {"TMUX": "/s,1,0", "TMUX_PANE": "%0", "NCCL_PROTO": "LL"}, "/srv", "alice")
    assert a == identity_hash(argv, {"TMUX": "/s,1,3", "TMUX_PANE": "%5", "NCCL_PROTO": "LL"}, "/srv", "alice")
    assert a != identity_hash(argv, {"TMUX": "/s,1,0", "TMUX_PANE": "%0", "NCCL_PROTO": "Simple"}, "/srv", "alice")


def test_a_server_started_in_screen_comes_back_in_its_session(tmp_path):
    box = _box("screen")
    try:
        before = _main_pid(box)
        sty, window = _environ(before)["STY"], _environ(before)["WINDOW"]
        back, fact = _investigate(box, tmp_path)
        after = _main_pid(box)
        env_after = _environ(after)
        assert env_after["STY"] == sty and env_after["WINDOW"] != window
        assert _stat(after)[0] == int(sty.split(".")[0])  # a window of that SCREEN process
        assert fact.identity_after == fact.identity_before and fact.outcome == "SAME"
        assert "screen" in back["found"] and "-r " + sty in back["found"]
    finally:
        box.remove()


def test_a_nohup_server_with_inherited_tmux_variables_is_restarted_detached_verbatim(tmp_path):
    """Must NOT fire: started from a shell inside tmux then detached (nohup), $TMUX names no parent of it."""
    inherited = {"TMUX": "/tmp/tmux-1000/default,4242,0", "TMUX_PANE": "%7"}
    box = _box("nohup", running_env=inherited)
    try:
        back, fact = _investigate(box, tmp_path)
        after = _main_pid(box)
        assert _stat(after)[1] == after  # its own process group (setsid), no tmux anywhere above it
        assert not box.tmux_socket.exists()
        env = _environ(after)
        assert {k: env[k] for k in inherited} == inherited  # its environment exactly as it was
        assert "tmux" not in back["found"] and fact.identity_after == fact.identity_before and fact.left_as_found
    finally:
        box.remove()


def test_a_server_writing_to_its_tmux_window_writes_to_the_new_window(tmp_path):
    """No log file (the launch line typed without a redirect): the restarted server's output is its new pane."""
    from specdoctor.engine.actions.user_server import bring_back

    sc = load_scenario("no-regression")
    box = build_sandbox(sc.model_copy(update={"server": sc.server.model_copy(
        update={"supervisor": "tmux", "terminal_output": True})}))
    try:
        assert Path(f"/proc/{_main_pid(box)}/fd/1").resolve().as_posix().startswith("/dev/pts/")
        ctx, before = _stopped_by_a_crashed_run(box, "tty")
        fact, decisions = bring_back(ctx, "tty", timeout_s=60)
        assert fact is not None and fact.restarted and fact.identity_after == before.identity_before, decisions
        assert Path(f"/proc/{fact.pid_after}/fd/1").resolve().as_posix().startswith("/dev/pts/")
        pane = next(line.split()[1] for line in _tmux(box, "list-panes", "-a", "-F", "#{pane_pid} #{pane_id}")
                    .splitlines() if line.split()[0] == str(fact.pid_after))
        assert "The server is fired up" in _tmux(box, "capture-pane", "-p", "-S", "-200", "-t", pane)
        assert not Path(box.server_log).exists()  # nothing redirected to a file the user never had
    finally:
        box.remove()
