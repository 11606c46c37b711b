"""Fault injection over the real loopback sshd: drop the link (or kill the controller) mid-step, then restore."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import WEIRD, FaultyHost, fingerprint

from specdoctor.errors import ConnectionLost
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.worktree import (
    ApplyInput,
    BackupInput,
    StashInput,
    apply_patches,
    backup_worktree,
    list_backups,
    restore,
    stash_all,
)

KIMI = "python/sglang/srt/models/kimi_k25.py"
TOPK = "python/sglang/srt/layers/moe/topk.py"
SCRIPT = "import pathlib\npathlib.Path('python/sglang/srt/models/kimi_k25.py').write_text('patched\\n')\nprint('1. SKIP - already imported')\nprint('2. WARN - could not find class definition')\n"


def _script(host, home: str) -> str:
    path = f"{home}/patch_kimik25_eagle3.py"
    host.put(SCRIPT.encode(), path)
    return path


def _steps(home: str, repo: str) -> dict[str, tuple[Callable, Callable]]:
    """step name → (setup(ctx), step(ctx)); setup runs on a healthy link, the step on the faulty one."""
    def nothing(ctx):
        return None

    def backed(ctx):
        backup_worktree(ctx, BackupInput(repo=repo))

    def stashed(ctx):
        stash_all(ctx, StashInput(repo=repo))

    def applied(ctx):
        stash_all(ctx, StashInput(repo=repo))
        apply_patches(ctx, ApplyInput(repo=repo, files=[KIMI, WEIRD]))

    def script_step(ctx):
        apply_patches(ctx, ApplyInput(repo=repo, hunks={TOPK: [0]}, script=_script(ctx.host, home),
                                      python="python3", from_clean=True))

    return {
        "backup": (nothing, lambda ctx: backup_worktree(ctx, BackupInput(repo=repo))),
        "stash_all": (nothing, lambda ctx: stash_all(ctx, StashInput(repo=repo))),
        "apply_files": (stashed, lambda ctx: apply_patches(ctx, ApplyInput(repo=repo, files=[KIMI, WEIRD]))),
        "apply_hunks_script": (backed, script_step),
        "restore": (applied, lambda ctx: restore(ctx, repo, ctx.run_id)),
    }


def _count(connect, repo, home, name) -> int:
    with connect() as h:
        ctx = ToolContext(host=h, run_id="count", auto_approve=True)
        setup, step = _steps(home, repo)[name]
        setup(ctx)
        probe = FaultyHost(h, fail_at=10**9)
        step(ToolContext(host=probe, run_id="count", auto_approve=True))
        n = probe.count
        restore(ctx, repo, "count")
    return n


# (step, fraction of the step's commands at which the link drops, how): 5 steps x 4 = 20 faults
CASES = [(s, f, m) for s in ("backup", "stash_all", "apply_files", "apply_hunks_script", "restore")
         for f, m in ((0.05, "before"), (0.35, "during"), (0.65, "after"), (0.95, "during"))]


@pytest.fixture(scope="module")
def step_sizes(sshd) -> dict[str, int]:
    """Commands each step issues, measured once on a healthy link."""
    sizes = {}
    for i, name in enumerate(dict.fromkeys(s for s, _f, _m in CASES)):
        home, repo = f"{sshd.workdir}/count-home{i}", f"{sshd.workdir}/count-repo{i}"

        def connect(home=home):
            return sshd.connect(base_env={"HOME": home})

        from helpers import make_messy_repo
        with connect() as h:
            h.run(["mkdir", "-p", home])
            make_messy_repo(h, repo)
        sizes[name] = _count(connect, repo, home, name)
    return sizes


@pytest.mark.parametrize(("step", "frac", "mode"), CASES)
def test_drop_connection_mid_step_then_restore(ssh_case, step_sizes, step, frac, mode):
    connect, repo, home = ssh_case
    with connect() as h:
        before = fingerprint(h, repo)
        setup, run_step = _steps(home, repo)[step]
        setup(ToolContext(host=h, run_id="faulty", auto_approve=True))
        fail_at = max(1, round(step_sizes[step] * frac))
        faulty = FaultyHost(h, fail_at=fail_at, mode=mode)
        with pytest.raises(ConnectionLost):
            run_step(ToolContext(host=faulty, run_id="faulty", auto_approve=True))
        assert faulty.count >= fail_at
    time.sleep(0.2)
    with connect() as h2:  # a new connection, a new context: everything needed is on the host
        ctx = ToolContext(host=h2, run_id="faulty", auto_approve=True)
        ids = [b.backup_id for b in list_backups(ctx, repo)]
        if "faulty" in ids:
            assert restore(ctx, repo, "faulty").verified
        else:  # the link died while the backup itself was being written: nothing may have changed yet
            assert step in ("backup", "stash_all", "apply_hunks_script") or frac < 0.1
        after = fingerprint(h2, repo)
    assert after == before


_CONTROLLER = """
import json, sys
from specdoctor.host.ssh import SSHHost
from specdoctor.toolkit import ToolContext
from specdoctor.tools.checkout.worktree import ApplyInput, StashInput, apply_patches, stash_all
cfg = json.loads(sys.argv[1])
host = SSHHost(cfg["host"], **cfg["kw"])
ctx = ToolContext(host=host, run_id="killed", auto_approve=True)
while True:
    stash_all(ctx, StashInput(repo=cfg["repo"]))
    apply_patches(ctx, ApplyInput(repo=cfg["repo"], files=cfg["files"]))
"""


@pytest.mark.parametrize("delay", [0.6, 1.1])
def test_kill_controller_process_then_restore_from_another(sshd, ssh_case, delay, tmp_path: Path):
    connect, repo, home = ssh_case
    with connect() as h:
        before = fingerprint(h, repo)
    kw = {"user": sshd.user, "port": sshd.port, "identity_files": [str(sshd.key_path)],
          "known_hosts": str(sshd.known_hosts), "allow_agent": False, "ssh_config": "/dev/null",
          "base_env": {"HOME": home}}
    cfg = json.dumps({"host": sshd.host, "kw": kw, "repo": repo, "files": [KIMI, TOPK]})
    proc = subprocess.Popen([sys.executable, "-c", _CONTROLLER, cfg], stderr=subprocess.PIPE)
    time.sleep(delay)
    proc.kill()
    _out, err = proc.communicate()
    assert proc.returncode == -9, err.decode()[-2000:]
    time.sleep(0.2)
    with connect() as h2:
        ctx = ToolContext(host=h2, run_id="other", auto_approve=True)
        backups = list_backups(ctx, repo)
        if backups:
            assert restore(ctx, repo, backups[0].backup_id).verified
        assert fingerprint(h2, repo) == before
