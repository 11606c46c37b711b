"""Off-host backup copy: the backup's trees land in a GitPython mirror on the controller and survive a lost box."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import git as gitpython
from helpers import WEIRD

from specdoctor.toolkit import ToolContext, registry

KIMI = "python/sglang/srt/models/kimi_k25.py"


def _check_mirror(out: dict, mirror_root: Path) -> gitpython.Repo:
    repo = gitpython.Repo(out["mirror"])
    assert Path(out["mirror"]).is_relative_to(mirror_root)
    c = repo.commit(out["ref"])
    assert c.tree.hexsha == out["worktree_tree"] and len(c.parents) == 1 + out["stashes"] == 3
    assert (c.tree / KIMI).data_stream.read().decode().endswith("    return 3\n")  # the unstaged edit
    assert (c.tree / WEIRD).data_stream.read() == b"weird = 2\n"
    assert (c.tree / "new_untracked.py").data_stream.read() == b"logger.info('new')\n"  # untracked kept
    assert "gone.txt" not in [b.path for b in c.tree.traverse()]  # the deletion kept
    index = c.parents[0].tree
    assert "set_eagle3_layers_to_capture" in (index / KIMI).data_stream.read().decode()  # the staged version
    return repo


def test_mirror_holds_the_whole_backup_and_survives_a_lost_box(local_ctx, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "controller"))
    ctx, repo = local_ctx
    assert registry.call(ctx, "backup_worktree", {"repo": repo}).ok
    r = registry.call(ctx, "mirror_backup", {"repo": repo})
    assert r.ok, r.summary
    _check_mirror(r.output, tmp_path / "controller" / "mirrors")
    files = {Path(f).name: Path(f) for f in r.output["files"]}
    assert {"meta.json", "state.tar.gz", "worktree.patch"} <= files.keys()
    with tarfile.open(files["state.tar.gz"]) as tar:
        assert "new_untracked.py" in tar.getnames()
    shutil.rmtree(repo)  # the box (or at least the checkout) is gone: the mirror alone still has it all
    shutil.rmtree(ctx.state_dir)
    _check_mirror(r.output, tmp_path / "controller" / "mirrors")
    again = registry.call(ctx, "mirror_backup", {"repo": repo})
    assert again.status != "ok" and len(again.summary.splitlines()) == 1


def test_mirror_over_ssh_leaves_the_checkout_and_its_git_untouched(ssh_case, tmp_path: Path, monkeypatch):
    from specdoctor.tools.checkout.manifest import take_manifest

    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "controller"))
    connect, repo, _home = ssh_case
    with connect() as h:
        ctx = ToolContext(host=h, run_id="mirror-ssh", auto_approve=True)
        assert registry.call(ctx, "backup_worktree", {"repo": repo}).ok
        before = take_manifest(ctx, repo)
        r = registry.call(ctx, "mirror_backup", {"repo": repo})
        assert r.ok, r.summary
        after = take_manifest(ctx, repo)
    assert before.diff(after).same, before.diff(after).differences  # refs, objects' owners, files: as they were
    _check_mirror(r.output, tmp_path / "controller" / "mirrors")
