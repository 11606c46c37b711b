"""One run per checkout: real processes race for the lock (LocalHost and over sshd); dead holders are taken over."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdoctor.errors import RepoRefused
from specdoctor.host import LocalHost
from specdoctor.testing import SSHServer
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.checkout_lock import (
    acquire_lock,
    checkout_lock,
    heartbeat,
    lock_path,
    read_lock,
    release_lock,
)

from .lock_campaign import CONTENDER, race

_n = itertools.count()


@pytest.fixture()
def repo(tmp_path: Path) -> tuple[LocalHost, str, str]:
    home = tmp_path / "home"
    home.mkdir()
    host = LocalHost(base_env={"HOME": str(home)})
    r = str(tmp_path / "repo")
    host.run(["git", "init", "-q", r])
    return host, r, str(home)


def test_concurrent_runs_exactly_one_wins_the_rest_are_refused_naming_it(repo):
    host, r, home = repo
    res = race(r, 4, {"kind": "local", "home": home})
    assert res.errors == [] and res.won == 1 and res.refused == 3 and res.named_holder == 3, res
    assert read_lock(ToolContext(host=host), r) is None  # the winner released it


def test_concurrent_runs_over_ssh(sshd: SSHServer):
    home = f"{sshd.workdir}/lock-home{next(_n)}"
    r = f"{sshd.workdir}/lock-repo{next(_n)}"
    with sshd.connect() as h:
        h.run(["mkdir", "-p", home])
        h.run(["git", "init", "-q", r])
    spec = {"kind": "ssh", "ssh": {"hostname": sshd.host, "user": sshd.user, "port": sshd.port,
                                   "identity_files": [str(sshd.key_path)], "known_hosts": str(sshd.known_hosts),
                                   "allow_agent": False, "ssh_config": str(sshd.root / "ssh_config"),
                                   "base_env": {"HOME": home}}}
    res = race(r, 3, spec)
    assert res.errors == [] and res.won == 1 and res.refused == 2 and res.named_holder == 2, res


def _hold(r: str, home: str, run_id: str) -> subprocess.Popen[str]:
    spec = {"kind": "local", "home": home, "repo": r, "run_id": run_id, "wait_go": False}
    p = subprocess.Popen([sys.executable, "-c", CONTENDER, json.dumps(spec)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    assert json.loads(p.stdout.readline())["won"]
    return p


def _kill(p: subprocess.Popen[str]) -> None:
    os.killpg(p.pid, signal.SIGKILL)  # our own contender, by its group
    p.wait(timeout=10)
    for f in (p.stdin, p.stdout):
        if f is not None:
            f.close()


def test_a_live_holder_is_never_displaced_and_a_dead_one_is_taken_over_with_a_note(repo):
    host, r, home = repo
    holder = _hold(r, home, "first-run")
    ctx = ToolContext(host=host, run_id="second-run")
    with pytest.raises(RepoRefused) as exc:
        acquire_lock(ctx, r)
    msg = str(exc.value)
    assert "in use by run first-run" in msg and f"pid {holder.pid}" in msg and "\n" not in msg
    _kill(holder)
    taken = acquire_lock(ctx, r)
    assert taken.took_over is not None and taken.took_over.run_id == "first-run"
    assert taken.note and "took over" in taken.note and "is gone" in taken.note
    assert read_lock(ctx, r).run_id == "second-run"
    assert not release_lock(ToolContext(host=host, run_id="first-run"), r)  # never another run's lock
    assert release_lock(ctx, r) and read_lock(ctx, r) is None


def test_a_holder_on_another_controller_is_stale_only_without_heartbeat(repo):
    host, r, home = repo
    ctx = ToolContext(host=host, run_id="mine")
    path = lock_path(ctx, r)
    other = {"run_id": "laptop-run", "pid": 1, "controller": "another-laptop", "user": "u", "host": "h",
             "checkout": r, "started": time.time() - 7200}
    host.put(json.dumps(other).encode(), path)
    with pytest.raises(RepoRefused, match="laptop-run"):  # fresh heartbeat (mtime now): alive as far as we know
        acquire_lock(ctx, r)
    host.run(["touch", "-d", "3 hours ago", path])
    taken = acquire_lock(ctx, r)
    assert taken.took_over is not None and "no sign of life" in (taken.note or "")
    assert heartbeat(ctx, r) and not heartbeat(ToolContext(host=host, run_id="laptop-run"), r)


def test_resume_takes_over_its_own_dead_lock_and_the_context_manager_releases(repo):
    host, r, home = repo
    holder = _hold(r, home, "run-7")
    _kill(holder)
    with checkout_lock(ToolContext(host=host, run_id="run-7"), r) as taken:
        assert taken.holder.pid == os.getpid() and taken.took_over and taken.took_over.run_id == "run-7"
        again = acquire_lock(ToolContext(host=host, run_id="run-7"), r)
        assert again.note == "already held by this process"
    assert read_lock(ToolContext(host=host), r) is None
