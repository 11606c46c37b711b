"""The exact host commands that bring the user's server back (bring_back): a nohup server is started detached with
`setsid nohup env -i` + its recorded environment, in its cwd, appending to its own log; a tmux server through a
0600 launcher (its environment without the old pane's location variables) run in a new window of its session.
Built here from the relaunch record, independently of bring_back, so that any change of what runs on the host
shows."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from specdoctor.engine.actions.user_server import Pending, _file_target, _save_pending, bring_back, host_key
from specdoctor.engine.runs import Relaunch, save_relaunch
from specdoctor.sim import SimHost
from specdoctor.sim.sandbox import Sandbox
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.serving.terminal_session import LOCATION_VARS
from specdoctor.tools.serving.user_server import UserServerRecord, capture

from .test_terminal_session import _box, _main_pid


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))


def _stopped(box: Sandbox, run_id: str) -> tuple[ToolContext, SimHost, Relaunch, Pending]:
    """What take_gpus leaves behind (relaunch file, pending marker, the server stopped), as in a crashed run."""
    host = SimHost(box)
    ctx = ToolContext(host=host, run_id=run_id, auto_approve=True)
    pid = _main_pid(box)
    rec = registry.typed_output(registry.call(ctx, "inspect_user_server", {"pid": pid, "port": box.port}),
                                UserServerRecord, where="test")
    assert rec is not None
    cap = capture(host, pid)
    rel = Relaunch(run_id=run_id, argv=cap.argv, env=cap.env, cwd=cap.cwd)
    pending = Pending(run_id=run_id, host=host_key(host), port=box.port, log_path=_file_target(rec.stdout),
                      user=rec.user, supervisor=rec.supervisor, session=rec.session, identity=rec.identity)
    save_relaunch(rel)
    _save_pending(pending)
    assert registry.call(ctx, "stop_user_server", {"pid": pid, "starttime": cap.starttime}).ok
    return ctx, host, rel, pending


def _recording(host: SimHost, monkeypatch) -> list[tuple[Any, bytes | None]]:
    """Every command the host runs from now on (unredacted), with what it got on stdin."""
    seen: list[tuple[Any, bytes | None]] = []
    real = host._exec

    def _exec(command, *, env, cwd, timeout, stdin):  # type: ignore[no-untyped-def]
        seen.append((command, stdin))
        return real(command, env=env, cwd=cwd, timeout=timeout, stdin=stdin)

    monkeypatch.setattr(host, "_exec", _exec)
    return seen


def _env_words(env: dict[str, str]) -> str:
    return " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())


def test_a_nohup_server_is_restarted_detached_with_exactly_its_launch_line(monkeypatch):
    box = _box("nohup")
    try:
        ctx, host, rel, pending = _stopped(box, "pin-nohup")
        assert pending.session is None and pending.log_path and rel.cwd
        seen = _recording(host, monkeypatch)
        fact, decisions = bring_back(ctx, "pin-nohup", timeout_s=60)
        assert fact is not None and fact.restarted and fact.healthy, decisions
        q = shlex.quote
        expected = (f"mkdir -p {q(ctx.run_dir)} && cd {q(rel.cwd)} && "
                    f"{{ setsid nohup env -i {_env_words(rel.env)} {shlex.join(rel.argv)} "
                    f">> {q(pending.log_path)} 2>&1 < /dev/null & }} && pid=$! && echo $pid")
        starts = [str(c) for c, _ in seen if "setsid nohup" in str(c)]
        assert starts == [expected]  # one start, no started.json record (not ours: never stopped by the run)
        assert not any("tmux" in str(c) or "screen" in str(c) for c, _ in seen)
    finally:
        box.remove()


def test_a_tmux_server_is_restarted_in_a_new_window_with_exactly_its_launch_line(monkeypatch):
    box = _box("tmux")
    try:
        ctx, host, rel, pending = _stopped(box, "pin-tmux")
        assert pending.session is not None and pending.log_path and rel.cwd
        seen = _recording(host, monkeypatch)
        fact, decisions = bring_back(ctx, "pin-tmux", timeout_s=60)
        assert fact is not None and fact.restarted and fact.healthy, decisions
        assert not any("setsid nohup" in str(c) for c, _ in seen)  # not detached
        q = shlex.quote
        written = [(str(c), s) for c, s in seen if str(c).startswith("umask 077 && mkdir -p ")]
        assert len(written) == 1
        command, stdin = written[0]
        m = re.fullmatch(rf"umask 077 && mkdir -p {re.escape(q(ctx.run_dir))} && cat > "
                         rf"({re.escape(ctx.run_dir)}/\.launch-user-server-\d+)\.sh", command)
        assert m, command
        stem = m.group(1)
        env = {k: v for k, v in rel.env.items() if k not in LOCATION_VARS}
        keep = [f'${{{v}+"{v}=${v}"}}' for v in LOCATION_VARS]
        assert stdin is not None and stdin.decode() == "\n".join([
            'rm -f "$0"', f"echo $$ > {q(stem + '.pid')}", f"cd {q(rel.cwd)} || exit 1",
            " ".join(["exec", "env", "-i", _env_words(env), *keep, shlex.join(rel.argv)])
            + f" >> {q(pending.log_path)} 2>&1"]) + "\n"
        windows = [str(c) for c, _ in seen if " new-window " in str(c)]
        assert len(windows) == 1
        assert windows[0].startswith(f"tmux -S {q(str(box.tmux_socket))} new-window -t "
                                     f"{q('=' + pending.session.session + ':')} -c {q(rel.cwd)} "), windows[0]
        assert f"exec sh {stem}.sh" in windows[0]
    finally:
        box.remove()
