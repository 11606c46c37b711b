"""Over the real sshd: trial trees leave a checkout in every awkward state identical; the manifest catches the in-place path."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from specdoctor.testing import SSHServer
from specdoctor.toolkit import ToolContext, registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "repo"))

from states import build_state  # noqa: E402

from specdoctor.inference import get_engine
from specdoctor.tools.checkout.manifest import take_manifest  # noqa: E402

SGLANG = get_engine("sglang")  # these tools act on an SGLang checkout: no detection from stray processes

_n = itertools.count()
KIMI = "python/sglang/srt/models/kimi_k25.py"


@pytest.fixture()
def ssh(sshd: SSHServer):
    home = f"{sshd.workdir}/cs-home{next(_n)}"
    with sshd.connect(base_env={"HOME": home}) as h:
        h.run(["mkdir", "-p", home])
        yield h


@pytest.mark.parametrize("state", ["all", "submodule-local-changes"])
def test_trial_trees_over_ssh_leave_the_checkout_identical(ssh, sshd: SSHServer, state: str):
    repo = f"{sshd.workdir}/cs-repo{next(_n)}"
    build_state(ssh, repo, state)
    ctx = ToolContext(host=ssh, run_id=f"cs{next(_n)}", auto_approve=True, run_engine=SGLANG)
    before = take_manifest(ctx, repo)
    for name, args in (("every", {"all_changes": True}), ("hunk", {"hunks": {KIMI: [0]}})):
        r = registry.call(ctx, "build_trial_tree", {"repo": repo, "name": name, **args})
        assert r.ok and r.output["checkout_before"] == r.output["checkout_after"], r.summary
        o = registry.call(ctx, "engine_origin", {"env": {"PYTHONPATH": r.output["pythonpath"]},
                                                 "python": "python3", "expect_under": r.output["path"]})
        assert o.ok and o.output["inside"], o.summary
    assert registry.call(ctx, "remove_trial_tree", {}).ok
    after = take_manifest(ctx, repo)
    assert before.diff(after).same, before.diff(after).differences
    assert after.git[0].refs == before.git[0].refs and after.git[0].worktrees == before.git[0].worktrees


def test_manifest_over_ssh_catches_the_legacy_in_place_path_and_exact_backups_restore_it(ssh, sshd: SSHServer):
    repo = f"{sshd.workdir}/cs-repo{next(_n)}"
    build_state(ssh, repo, "all", without={"big-untracked"})
    ctx = ToolContext(host=ssh, run_id=f"cs{next(_n)}", auto_approve=True, run_engine=SGLANG)
    before = take_manifest(ctx, repo)
    assert registry.call(ctx, "stash_all", {"repo": repo}).ok
    exact = registry.call(ctx, "restore_worktree", {"repo": repo})
    assert exact.ok and exact.output["manifest_verified"], exact.summary
    assert before.diff(take_manifest(ctx, repo)).same
    legacy = registry.call(ctx, "backup_worktree", {"repo": repo, "backup_id": "legacy"}).output
    for name in ("manifest.json", "exact.tar", "index.raw"):  # a first-round backup: git's view only
        ssh.run(["rm", "-f", "--", f"{legacy['dir']}/{name}"])
    assert registry.call(ctx, "stash_all", {"repo": repo, "backup_id": "legacy"}).ok
    registry.call(ctx, "restore_worktree", {"repo": repo, "backup_id": "legacy"})
    diff = before.diff(take_manifest(ctx, repo))
    assert not diff.same
    text = "\n".join(diff.differences)
    for expect in ("mode 0600 → 0644", "removed dir 'empty_a'", "flags ['assume-unchanged'] → []", "'crlf.py'"):
        assert expect in text, (expect, diff.differences)
