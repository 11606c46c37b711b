"""Off-host copy of a backup: its git objects fetched into a mirror on the controller (GitPython) plus its files.

On the host, a staging repository under ~/.specdoctor/mirror-stage (borrowing the checkout's objects read-only)
writes self-contained commits for the backup — the working tree (tracked + untracked), the index and each
stash, without history — and bundles them; the controller fetches that bundle into a bare mirror with
GitPython and copies state.tar.gz, meta.json and the patches beside it. A lost box then loses none of the
user's changes: `git --git-dir MIRROR archive refs/specdoctor/backups/ID` gives the whole tree back.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import tempfile
from pathlib import Path

import git as gitpython
from pydantic import BaseModel, Field

from specdoctor.errors import BackupError, ToolFailed
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.checkout.worktree import BACKUP_NS, load_backup, run_backup_id

__all__ = ["MirrorInput", "Mirrored", "mirror_backup", "mirror_root", "mirror_backup_offhost"]

_IDENT = {"GIT_AUTHOR_NAME": "specdoctor", "GIT_AUTHOR_EMAIL": "specdoctor@localhost",
          "GIT_COMMITTER_NAME": "specdoctor", "GIT_COMMITTER_EMAIL": "specdoctor@localhost",
          "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
_FILES = ("meta.json", "state.tar.gz", "worktree.patch", "index.patch")


def mirror_root() -> Path:
    """Controller-side mirrors: $SPECDOCTOR_HOME/mirrors (default ~/.specdoctor/mirrors)."""
    return Path(os.environ.get("SPECDOCTOR_HOME") or Path.home() / ".specdoctor") / "mirrors"


class MirrorInput(BaseModel):
    """Arguments of mirror_backup."""

    repo: str = Field(description="Path of the git checkout on the host.")
    backup_id: str | None = Field(default=None, description="Default: this run's backup.")


class Mirrored(BaseModel):
    """Where the off-host copy of a backup lives on the controller, and the proof that it is complete."""

    backup_id: str
    mirror: str = Field(description="Bare git repository on the controller.")
    ref: str
    commit: str
    worktree_tree: str = Field(description="Equal to the backup's working-tree tree on the host (verified).")
    index_tree: str
    stashes: int
    files: list[str] = Field(default_factory=list, description="Backup files copied beside the mirror.")
    bundle_bytes: int = 0

    def summary_line(self) -> str:
        return (f"backup {self.backup_id} mirrored to {self.mirror} ({self.bundle_bytes} bytes, tree "
                f"{self.worktree_tree[:10]} verified, {self.stashes} stashes, {len(self.files)} files)")


def _key(ctx: ToolContext, repo: str) -> str:
    host = re.sub(r"[^A-Za-z0-9._-]+", "-", ctx.host.name).strip(".-") or "host"
    return f"{host}/{hashlib.sha256(repo.encode()).hexdigest()[:16]}"


def mirror_backup_offhost(ctx: ToolContext, repo: str, backup_id: str | None = None,
                          root: Path | None = None) -> Mirrored:
    """Copy a backup off the host (see the module doc); the user's checkout and its .git are only read."""
    b = load_backup(ctx, repo, backup_id or run_backup_id(ctx))
    run = ctx.host.run
    common = run(["sh", "-c", 'cd "$1" && cd "$(git rev-parse --git-common-dir)" && pwd -P', "common", repo]
                 ).stdout.strip()
    key = _key(ctx, repo)
    stage = f"{ctx.state_dir}/mirror-stage/{key.replace('/', '-')}.git"
    if not ctx.host.exists(f"{stage}/objects"):
        run(["git", "init", "-q", "--bare", stage])
    ctx.host.put(f"{common}/objects\n".encode(), f"{stage}/objects/info/alternates")
    sg = ["git", "--git-dir", stage]

    def commit(tree: str, message: str, *parents: str) -> str:
        args = [x for p in parents for x in ("-p", p)]
        return run([*sg, "commit-tree", tree, *args, "-m", message], env=_IDENT).stdout.strip()

    index = commit(b.index_tree, f"specdoctor backup {b.backup_id}: the index")
    stashes = []
    for s in b.stashes:  # each stash as commits of its trees: working tree, index, untracked files
        trees = run([*sg, "rev-parse", f"{s.sha}^{{tree}}", f"{s.sha}^2^{{tree}}"]).stdout.split()
        extra = run([*sg, "rev-parse", "--verify", "-q", f"{s.sha}^3^{{tree}}"], check="ignore").stdout.split()
        parts = [commit(t, f"stash {s.subject}: {what}") for t, what in zip(trees[1:] + extra,
                                                                               ("index", "untracked"), strict=False)]
        stashes.append(commit(trees[0], f"stash {s.subject}", *parts))
    meta = run(["git", "-C", repo, "log", "-1", "--format=%B", b.commit]).stdout
    top = commit(b.worktree_tree, meta, index, *stashes)
    ref = f"refs/specdoctor/portable/{b.backup_id}"
    run([*sg, "update-ref", ref, top])
    bundle = f"{ctx.state_dir}/mirror-stage/{b.backup_id}-{secrets.token_hex(3)}.bundle"
    try:
        run([*sg, "bundle", "create", "-q", bundle, ref], timeout=1800)
        data = ctx.host.read(bundle)
    finally:
        run(["rm", "-f", "--", bundle], check="ignore")
    base = (root or mirror_root()) / key
    mirror = base.with_suffix(".git") if base.suffix != ".git" else base
    mirror.parent.mkdir(parents=True, exist_ok=True)
    repo_local = gitpython.Repo(mirror) if (mirror / "HEAD").exists() else gitpython.Repo.init(mirror, bare=True)
    with tempfile.TemporaryDirectory(prefix="sd-bundle-") as tmp:
        path = Path(tmp) / "backup.bundle"
        path.write_bytes(data)
        repo_local.git.fetch(str(path), f"+{ref}:{BACKUP_NS}{b.backup_id}")
    got = repo_local.commit(f"{BACKUP_NS}{b.backup_id}")
    if got.tree.hexsha != b.worktree_tree or got.parents[0].tree.hexsha != b.index_tree:
        raise BackupError(f"mirror of backup {b.backup_id} does not match the host's trees; the host copy stays")
    files_dir = Path(str(mirror)[:-4] + "-files") / b.backup_id
    files_dir.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in _FILES:
        if b.dir and ctx.host.exists(f"{b.dir}/{name}"):
            (files_dir / name).write_bytes(ctx.host.read(f"{b.dir}/{name}"))
            copied.append(str(files_dir / name))
    (files_dir / "mirror.json").write_text(json.dumps({"host": ctx.host.name, "repo": repo, "commit": got.hexsha}))
    return Mirrored(backup_id=b.backup_id, mirror=str(mirror), ref=f"{BACKUP_NS}{b.backup_id}", commit=got.hexsha,
                    worktree_tree=got.tree.hexsha, index_tree=got.parents[0].tree.hexsha, stashes=len(stashes),
                    files=copied, bundle_bytes=len(data))


@tool(effect="mutate")
def mirror_backup(ctx: ToolContext, args: MirrorInput) -> Mirrored:
    """Copy a backup off the host: a git mirror on the controller (GitPython) plus its tarball, verified.

    The backup's trees (working tree, index, each stash) are fetched into a bare mirror under
    ~/.specdoctor/mirrors and its tarball/patches copied beside it. Writes only specdoctor's own folders.
    """
    try:
        return mirror_backup_offhost(ctx, args.repo, args.backup_id)
    except (OSError, gitpython.GitCommandError) as exc:  # the controller's side: its disk, its git
        raise ToolFailed(f"the off-host mirror could not be written on this controller: {exc}".splitlines()[0]
                         ) from exc
