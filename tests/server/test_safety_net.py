"""The one safety net (runner and embed Client): stop this run's servers, restore every backup, never stop early."""

from __future__ import annotations

from pydantic import BaseModel

from specdoctor.errors import ConnectionLost
from specdoctor.toolkit import ToolContext, ToolRegistry, registry
from specdoctor.toolkit.safety import safety_net

from .helpers import PYTHON

LAUNCH = "python3 -m sglang.launch_server --model /m --tp 1 --port 30000"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_servers_are_stopped_and_a_failed_restore_is_reported_not_raised(local_ctx):
    started = [registry.call(local_ctx, "launch_server", {"command": LAUNCH, "python": PYTHON, "port": 0,
                                                           "timeout_s": 30, "label": f"s{i}"}) for i in range(2)]
    assert all(s.ok for s in started), [s.summary for s in started]
    steps = safety_net(local_ctx, {"/nonexistent/repo": "bk-missing"})
    assert [s.tool for s in steps] == ["stop_server", "restore_worktree"]
    stop, restore = steps
    assert stop.ok and sorted(stop.output["stopped"]) == sorted(s.output["pgid"] for s in started)
    assert stop.evidence and not any(_alive(pid) for s in started for pid in s.output["pids"])
    assert not restore.ok and restore.repo == "/nonexistent/repo"


class _In(BaseModel):
    repo: str | None = None
    backup_id: str | None = None


class _Out(BaseModel):
    done: bool = True


def test_a_stop_that_raises_does_not_skip_the_restores(local_ctx):
    reg = ToolRegistry()
    calls: list[str] = []

    def stop_server(ctx: ToolContext, args: _In) -> _Out:
        """Stand-in: the link drops while stopping."""
        calls.append("stop")
        raise ConnectionLost("link dropped")

    def restore_worktree(ctx: ToolContext, args: _In) -> _Out:
        """Stand-in: records which repo it restored."""
        calls.append(f"restore {args.repo}")
        return _Out()

    reg.register(stop_server, effect="disrupt")
    reg.register(restore_worktree, effect="mutate")
    steps = safety_net(local_ctx, {"/a": "b1", "/b": "b2"}, reg=reg)
    assert calls == ["stop", "restore /a", "restore /b"]
    assert steps[0].status == "error" and "link dropped" in steps[0].summary
    assert [s.ok for s in steps[1:]] == [True, True]
