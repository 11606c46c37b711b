"""Repos in awkward states over the loopback sshd: refused before any change, or handled and put back byte-identical."""

from __future__ import annotations

import itertools
import shlex

import pytest

from specdoctor.host import Raw
from specdoctor.testing import SSHServer
from specdoctor.toolkit import ToolContext, registry

from .hostile import _repo_helpers

_n = itertools.count()
_ID = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; "
KIMI = "python/sglang/srt/models/kimi_k25.py"

# Each builds on a fresh messy repo at "$R"; the state is what the name says.
STATES = {
    "mid-merge": "cd \"$R\" && git stash -q -u && git checkout -q -b side && echo side > c.txt && git add c.txt && "
                 "git commit -qm side && git checkout -q main && echo main > c.txt && git add c.txt && "
                 "git commit -qm main && ! git merge -q side",
    "mid-rebase": "cd \"$R\" && git stash -q -u && git checkout -q -b side && echo side > c.txt && git add c.txt && "
                  "git commit -qm side && git checkout -q main && echo main > c.txt && git add c.txt && "
                  "git commit -qm main && git checkout -q side && ! git rebase -q main",
    "dirty-submodule": "cd \"$R\" && git init -q ../sub$$ && (cd ../sub$$ && echo s > s.txt && git add s.txt && "
                       "git commit -qm s) && git -c protocol.file.allow=always submodule -q add ../sub$$ sub && "
                       "git commit -qm sub && echo dirty >> sub/s.txt",
}


def _new_repo(host, workdir: str) -> str:
    repo = f"{workdir}/state-repo{next(_n)}"
    _repo_helpers().make_messy_repo(host, repo)
    return repo


@pytest.fixture()
def ssh(sshd: SSHServer):
    home = f"{sshd.workdir}/state-home{next(_n)}"
    with sshd.connect(base_env={"HOME": home}) as h:
        h.run(["mkdir", "-p", home])
        yield h


@pytest.mark.parametrize("state", sorted(STATES))
def test_busy_or_dirty_states_are_refused_before_any_change(ssh, sshd: SSHServer, state: str):
    fp = _repo_helpers().fingerprint
    repo = _new_repo(ssh, str(sshd.workdir))
    ssh.run(Raw(_ID + f"R={shlex.quote(repo)}; " + STATES[state]))
    before = fp(ssh, repo)
    ctx = ToolContext(host=ssh, run_id=f"state{next(_n)}", auto_approve=True)
    # A dirty submodule is backed up around (the backup never writes into it, and trials run in trial trees);
    # only the tools that change the checkout in place refuse it.
    backs_up = state == "dirty-submodule"
    for tool, args in (("backup_worktree", {"repo": repo}), ("stash_all", {"repo": repo}),
                       ("apply_patches", {"repo": repo, "files": [KIMI]})):
        r = registry.call(ctx, tool, args)
        if tool == "backup_worktree" and backs_up:
            assert r.ok, r.summary
            continue
        assert r.status == "error", (tool, r.summary)
        assert len(r.summary.splitlines()) == 1
        assert any(w in r.summary for w in ("in progress", "submodule", "conflicts")), r.summary
    assert fp(ssh, repo) == before
    refs = ssh.run(["git", "-C", repo, "for-each-ref", "--format=%(refname)", "refs/specdoctor/"]).stdout.split()
    assert len(refs) == int(backs_up)  # otherwise not even a backup ref: the refusal comes first


@pytest.mark.parametrize("where", ["not-a-repo", "missing"])
def test_not_a_repo_or_missing_is_a_clear_error(ssh, sshd: SSHServer, where: str):
    path = f"{sshd.workdir}/plain{next(_n)}"
    if where == "not-a-repo":
        ssh.run(["mkdir", "-p", path])
        ssh.run(["touch", f"{path}/file"])
    ctx = ToolContext(host=ssh, run_id=f"plain{next(_n)}", auto_approve=True)
    for tool in ("backup_worktree", "stash_all", "catalog_diffs"):
        try:
            r = registry.call(ctx, tool, {"repo": path})
            ok, msg = r.status != "ok", r.summary
        except Exception as exc:  # a HostError (CommandFailed) is a clear one-line error too
            from specdoctor.errors import SpecdoctorError

            assert isinstance(exc, SpecdoctorError), repr(exc)
            ok, msg = True, str(exc)
        assert ok and path in msg and len(msg.splitlines()) == 1, msg
    if where == "not-a-repo":
        assert ssh.run(["ls", "-A", path]).stdout.split() == ["file"]


@pytest.mark.parametrize("detached", [False, True])
def test_messy_repo_round_trip_is_byte_identical(ssh, sshd: SSHServer, detached: bool):
    """Staged + unstaged + untracked + two stashes + a name with spaces, unicode and a newline; detached HEAD too."""
    helpers = _repo_helpers()
    repo = f"{sshd.workdir}/rt-repo{next(_n)}"
    helpers.make_messy_repo(ssh, repo, detached=detached)
    before = helpers.fingerprint(ssh, repo)
    assert helpers.WEIRD.encode().hex() in before.replace("2e2f", "")  # the weird name is really there
    ctx = ToolContext(host=ssh, run_id=f"rt{next(_n)}", auto_approve=True)
    assert registry.call(ctx, "backup_worktree", {"repo": repo}).ok
    assert registry.call(ctx, "stash_all", {"repo": repo}).output["clean"]
    assert registry.call(ctx, "apply_patches", {"repo": repo, "files": [KIMI, helpers.WEIRD]}).ok
    assert helpers.fingerprint(ssh, repo) != before
    r = registry.call(ctx, "restore_worktree", {"repo": repo})
    assert r.ok and r.output["verified"], r.summary
    assert helpers.fingerprint(ssh, repo) == before


@pytest.mark.parametrize("target", ["state.tar.gz", "worktree.patch", "index.patch"])
def test_disk_full_while_writing_the_backup_refuses_and_loses_nothing(ssh, sshd: SSHServer, target: str):
    """The backup file is /dev/full (writes fail with ENOSPC, as on a full disk): no mutation follows."""
    helpers = _repo_helpers()
    repo = _new_repo(ssh, str(sshd.workdir))
    before = helpers.fingerprint(ssh, repo)
    rid = f"full{next(_n)}"
    bdir = f"{ssh.home()}/.specdoctor/backups/{rid}"
    ctx = ToolContext(host=ssh, run_id=rid, auto_approve=True)
    for tool, args in (("stash_all", {"repo": repo}), ("apply_patches", {"repo": repo, "files": [KIMI]})):
        ssh.run(["mkdir", "-p", bdir])  # the disk stays full: a failed backup removes its own folder
        ssh.run(["ln", "-sfn", "/dev/full", f"{bdir}/{target}"])
        r = registry.call(ctx, tool, args)
        assert r.status == "error" and "backup" in r.summary and "not changed" in r.summary, r.summary
    assert helpers.fingerprint(ssh, repo) == before
    assert ssh.run(["git", "-C", repo, "for-each-ref", "refs/specdoctor/"]).stdout == ""


@pytest.mark.parametrize(("script", "kinds"), [
    ("print('1. WARN - could not find class definition')", {"WARN", "could-not-find"}),
    ("print('ERROR: hunk 2 failed')", {"ERROR"}),
    ("import sys; print('patched'); sys.exit(3)", {"exit-code"}),
])
def test_patch_script_warnings_and_failures_are_flagged_ambiguous(ssh, sshd: SSHServer, script: str, kinds):
    repo = _new_repo(ssh, str(sshd.workdir))
    path = f"{sshd.workdir}/patch{next(_n)}.py"
    ssh.put(script.encode(), path)
    ctx = ToolContext(host=ssh, run_id=f"amb{next(_n)}", auto_approve=True)
    r = registry.call(ctx, "apply_patches", {"repo": repo, "script": path, "python": "python3", "from_clean": True})
    assert r.ok, r.summary
    found = {k for a in r.output["ambiguous"] for k in a["kind"].split("+")}
    assert kinds <= found, r.output["ambiguous"]
    assert "ambiguous" in r.summary
    assert registry.call(ctx, "restore_worktree", {"repo": repo}).ok
