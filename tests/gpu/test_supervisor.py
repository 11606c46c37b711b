"""Which supervisor runs a server, from /proc/PID/cgroup and the parent chain (as read on real boxes)."""

from __future__ import annotations

import pytest

from specdoctor.tools.serving.user_server import (
    RESTARTERS,
    Ancestor,
    classify_supervisor,
    identity_hash,
    manual_step,
)

_LOGIN = "0::/user.slice/user-1000.slice/session-4.scope"
_SHELL = Ancestor(900, "-bash")


@pytest.mark.parametrize(("cgroup", "ancestors", "ppid", "kind"), [
    ("0::/system.slice/sglang.service", [], 1, "systemd"),
    ("0::/system.slice/docker-3f2a9c1b7d4e.scope", [], 1, "container"),
    ("12:memory:/docker/3f2a9c1b7d4e8a61c0", [], 1, "container"),
    ("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-ab12.scope", [], 1, "container"),
    (_LOGIN, [Ancestor(40, "/usr/bin/python3 /usr/bin/supervisord -c /etc/supervisor/supervisord.conf")], 40,
     "supervisord"),
    (_LOGIN, [Ancestor(41, "sh -c while true; do python -m sglang.launch_server --port 30000; sleep 5; done")], 41,
     "restarter"),
    (_LOGIN, [_SHELL, Ancestor(800, "tmux new-session -s serve")], 900, "tmux"),
    (_LOGIN, [_SHELL, Ancestor(801, "SCREEN -S serve")], 900, "screen"),
    (_LOGIN, [], 1, "nohup"),
    (_LOGIN, [_SHELL, Ancestor(700, "sshd: alice@pts/0")], 900, "none"),
    # must NOT fire: a user's systemd manager and its session scope are not a service owning the server
    ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope", [_SHELL], 900, "none"),
])
def test_supervisor_kinds(cgroup, ancestors, ppid, kind):
    got, detail = classify_supervisor(cgroup, ancestors, ppid)
    assert got == kind, detail


def test_only_restarting_supervisors_block_and_the_manual_step_names_the_unit():
    assert {"tmux", "screen", "nohup", "none"}.isdisjoint(RESTARTERS)
    line = manual_step("systemd", "unit sglang.service", 30000)
    assert "systemctl stop sglang.service" in line and ":30000" in line and "\n" not in line


def test_identity_ignores_the_pid_but_not_the_environment():
    a = identity_hash(["python", "-m", "sglang.launch_server"], {"NCCL_PROTO": "LL"}, "/srv", "alice")
    assert a == identity_hash(["python", "-m", "sglang.launch_server"], {"NCCL_PROTO": "LL"}, "/srv", "alice")
    assert a != identity_hash(["python", "-m", "sglang.launch_server"], {"NCCL_PROTO": "Simple"}, "/srv", "alice")
    assert a != identity_hash(["python", "-m", "sglang.launch_server"], {"NCCL_PROTO": "LL"}, "/srv", "bob")
