"""Safe mutation of a checkout: exact backups (ref + tarball + hash), byte-identical restore, stash, patch re-apply."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import shlex
import time
from typing import NamedTuple

import unidiff
from pydantic import BaseModel, Field

from specdoctor.errors import BackupError, CommandFailed, RepoRefused, ToolRetry, Unresolved
from specdoctor.host.base import Raw
from specdoctor.parsers.git import (
    REF_MARKER,
    Ambiguous,
    BackupInfo,
    StashEntry,
    ambiguous_lines,
    parse_backup_refs,
    parse_stash_list,
    select_hunks,
    split_z,
)
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.checkout.manifest import Manifest, decode_name, take_manifest
from specdoctor.tools.checkout.patch_script import script_command
from specdoctor.tools.checkout.repo import git, repo_state

__all__ = ["Snapshot", "BackupInput", "Backup", "RestoreInput", "Restored", "BackupInfo", "snapshot",
           "state_hash", "check_mutable", "ensure_backup", "make_backup", "load_backup", "restore", "list_backups",
           "clean_to_head", "write_paths_from", "run_backup_id", "backup_worktree", "restore_worktree", "stash_all",
           "apply_patches", "StashInput", "Stashed", "ApplyInput", "Applied", "ScriptChange", "BACKUP_NS"]

BACKUP_NS = "refs/specdoctor/backups/"
RESTORED_NS = "refs/specdoctor/restored/"
SAFETY_NS = "refs/specdoctor/pre-restore/"
_IDENT = {"GIT_AUTHOR_NAME": "specdoctor", "GIT_AUTHOR_EMAIL": "specdoctor@localhost",
          "GIT_COMMITTER_NAME": "specdoctor", "GIT_COMMITTER_EMAIL": "specdoctor@localhost"}


class Snapshot(BaseModel):
    """The exact state of a checkout, as git objects, and its content hash."""

    head: str
    branch: str | None
    index_tree: str
    worktree_tree: str = Field(description="Tracked + untracked (not ignored) files as a tree.")
    stashes: list[StashEntry] = Field(default_factory=list)
    untracked: list[str] = Field(default_factory=list)
    hash: str


def state_hash(head: str, branch: str | None, index_tree: str, worktree_tree: str, stash_shas: list[str]) -> str:
    """sha256 over HEAD, branch, index tree, worktree tree (incl. untracked) and the stash list."""
    blob = json.dumps([head, branch, index_tree, worktree_tree, stash_shas], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _toplevel(ctx: ToolContext, repo: str) -> str:
    return ctx.host.run(git(repo, "rev-parse", "--show-toplevel")).stdout.strip()


def check_mutable(ctx: ToolContext, repo: str, *, submodules_ok: bool = False) -> tuple[str, str | None, str]:
    """Refuse (RepoRefused, one line) mid-merge/rebase, with conflicts, dirty submodules or no commit; else HEAD.

    `submodules_ok`: a submodule with local changes is fine for what never writes into it (a backup, a restore
    of the superproject's paths): trials run in trial trees, so only the in-place tools still refuse."""
    head, branch, gdir, busy = repo_state(ctx, repo, full=True)
    ops = [b for b in busy if b != "conflicts" and not b.startswith("submodule ")]
    if ops:
        raise RepoRefused(f"{repo}: a {ops[0]} is in progress; finish or abort it before specdoctor changes files")
    if head is None:
        raise RepoRefused(f"{repo}: HEAD has no commit yet; nothing to back up against")
    if "conflicts" in busy:
        raise RepoRefused(f"{repo}: the index has unresolved conflicts; resolve them first")
    subs = [b for b in busy if b.startswith("submodule ")]
    if subs and not submodules_ok:
        raise RepoRefused(f"{repo}: {subs[0]}; commit or reset it first (specdoctor does not back up "
                          "submodule contents)")
    return head, branch, gdir


def _tree_of_worktree(ctx: ToolContext, repo: str, gdir: str, include_ignored: bool) -> str:
    """Write the working tree (tracked + untracked) as a tree with a throwaway index; the real index is untouched."""
    tmp, env = f"{gdir}/specdoctor-index-{secrets.token_hex(6)}", {}
    env["GIT_INDEX_FILE"] = tmp
    try:
        ctx.host.run(["cp", "-p", f"{gdir}/index", tmp], check="ignore")
        ctx.host.run(git(repo, "add", "-A", *(["--force"] if include_ignored else []), "--", "."), env=env,
                     timeout=600)
        return ctx.host.run(git(repo, "write-tree"), env=env).stdout.strip()
    finally:
        ctx.host.run(["rm", "-f", "--", tmp], check="ignore")


def snapshot(ctx: ToolContext, repo: str, include_ignored: bool = False) -> Snapshot:
    """Record the checkout's exact state as git objects (nothing in the checkout changes)."""
    head, branch, gdir = check_mutable(ctx, repo, submodules_ok=True)
    wtree = _tree_of_worktree(ctx, repo, gdir, include_ignored)
    itree = ctx.host.run(git(repo, "write-tree")).stdout.strip()
    stashes = parse_stash_list(ctx.host.run(git(repo, "stash", "list", "--format=%H%x00%gs"), check="ignore").stdout)
    others = ["--others"] + ([] if include_ignored else ["--exclude-standard"])
    untracked = split_z(ctx.host.run(git(repo, "ls-files", *others, "-z")).stdout)
    return Snapshot(head=head, branch=branch, index_tree=itree, worktree_tree=wtree, stashes=stashes,
                    untracked=untracked,
                    hash=state_hash(head, branch, itree, wtree, [s.sha for s in stashes]))


class BackupInput(BaseModel):
    """Arguments of backup_worktree."""

    repo: str = Field(description="Path of the git checkout on the host.")
    backup_id: str | None = Field(default=None, description="Default: this run's id (one backup per run).")
    include_ignored: bool = Field(default=False, description="Also capture ignored files (large build dirs!).")
    reserve_mb: int = Field(default=64, ge=0, description="Free space to leave on the host's disks.")


class Backup(BaseModel):
    """Where a backup lives and what it recorded."""

    backup_id: str
    repo: str
    ref: str
    commit: str
    head: str
    branch: str | None
    detached: bool
    index_tree: str
    worktree_tree: str
    stashes: list[StashEntry] = Field(default_factory=list)
    untracked: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list, description="Paths differing from HEAD (incl. untracked).")
    hash: str
    include_ignored: bool = False
    dir: str | None = Field(default=None, description="Host folder with state.tar.gz, worktree.patch, meta.json.")
    manifest: str | None = Field(default=None, description="Digest of the checkout's file-level manifest at backup time "
                                 "(manifest.json + exact.tar + index.raw in dir restore it path for path).")
    created: str = ""
    reused: bool = Field(default=False, description="An existing backup of this run was returned.")

    def summary_line(self) -> str:
        where = self.branch or f"detached {self.head[:10]}"
        return (f"backup {self.backup_id} {'(existing) ' if self.reused else ''}of {self.repo} on {where}: "
                f"{len(self.changed)} changed paths, {len(self.stashes)} stashes, hash {self.hash[:12]}")


def _sanitize(backup_id: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", backup_id).strip(".-")
    if not clean or ".." in clean or clean.endswith(".lock"):
        raise ToolRetry(f"invalid backup id {backup_id!r}")
    return clean


def run_backup_id(ctx: ToolContext) -> str:
    """This run's backup id (an ad-hoc context gets a fresh stamped id, kept for the context's life)."""
    if ctx.run_id != "adhoc":
        return _sanitize(ctx.run_id)
    if "worktree:backup_id" not in ctx.cache:
        ctx.cache["worktree:backup_id"] = f"adhoc-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    return ctx.cache["worktree:backup_id"]


def _free_kb(ctx: ToolContext, path: str) -> int | None:
    res = ctx.host.run(["df", "-Pk", path], check="ignore")
    lines = res.stdout.strip().splitlines()
    cells = lines[-1].split() if res.ok and len(lines) >= 2 else []
    return int(cells[3]) if len(cells) >= 4 and cells[3].isdigit() else None


def _bytes_of(ctx: ToolContext, top: str, paths: list[str]) -> int:
    total = 0
    for i in range(0, len(paths), 400):
        chunk = [f"{top}/{p}" for p in paths[i:i + 400]]
        res = ctx.host.run(["stat", "-c", "%s", "--", *chunk], check="ignore")
        total += sum(int(x) for x in res.stdout.split() if x.isdigit())
    return total


def _changed(ctx: ToolContext, repo: str, a: str, b: str) -> list[tuple[str, str]]:
    out = split_z(ctx.host.run(git(repo, "diff-tree", "-r", "-z", "--no-renames", "--name-status", a, b)).stdout)
    return [(out[i][:1], out[i + 1]) for i in range(0, len(out) - 1, 2)]


def _write_exact(ctx: ToolContext, top: str, gdir: str, bdir: str, m: Manifest) -> None:
    """manifest.json, exact.tar (every path the manifest content-hashes, bytes-exact, sparse-aware) and index.raw.

    Large ignored files hashed by size+mtime are listed in the manifest but not copied (they are not at risk:
    nothing specdoctor runs removes ignored files); a restore names any it finds changed.
    """
    q = shlex.quote
    ctx.host.put(m.model_dump_json().encode(), f"{bdir}/manifest.json")
    names = [decode_name(e.path) for e in m.entries if e.hashed != "stat" and e.kind in ("file", "dir", "symlink")]
    ctx.host.run(Raw(f"cd {q(top)} && tar --null --no-recursion --sparse -T - -cf {q(bdir + '/exact.tar')}"),
                 stdin=b"".join(n + b"\0" for n in names), timeout=1800)
    ctx.host.run(["cp", "-p", "--", f"{gdir}/index", f"{bdir}/index.raw"])


def _repair_from_manifest(ctx: ToolContext, top: str, gdir: str, bdir: str) -> tuple[Manifest, Manifest, list[str]]:
    """Put every path back as the backup's manifest recorded it (content, mode, kind, target, empty dirs, index).

    Returns (saved manifest, manifest after the repair, what was done).
    """
    saved = Manifest.model_validate_json(ctx.host.read(f"{bdir}/manifest.json"))
    now = take_manifest(ctx, top, big_bytes=saved.big_bytes)
    done: list[str] = []
    if now.digest == saved.digest:
        return saved, now, done
    plan = _plan_repair(saved, now)
    done += plan.skipped
    done += _remove_paths(ctx, top, plan.extra)
    done += _extract_paths(ctx, top, bdir, plan.fetch)
    done += _restore_modes(ctx, top, plan.chmod, saved, plan.fetch)
    done += _restore_index(ctx, gdir, bdir, saved, now)
    return saved, take_manifest(ctx, top, big_bytes=saved.big_bytes), done


class _RepairPlan(NamedTuple):
    """What a repair must do: paths to remove, paths to take from exact.tar, modes to set, what it cannot do."""

    extra: list[str]
    fetch: list[str]
    chmod: list[tuple[str, int]]
    skipped: list[str]


def _plan_repair(saved: Manifest, now: Manifest) -> _RepairPlan:
    """Compare the saved manifest with the checkout's: a path of another kind is removed, then fetched."""
    want, have = {e.path: e for e in saved.entries}, {e.path: e for e in now.entries}
    extra = [p for p in have if p not in want]
    fetch: list[str] = []
    chmod: list[tuple[str, int]] = []
    skipped: list[str] = []
    for path, e in want.items():
        cur = have.get(path)
        if cur is not None and (cur.kind, cur.size, cur.sha256, cur.target) == (e.kind, e.size, e.sha256, e.target):
            if cur.mode != e.mode and e.kind != "symlink":
                chmod.append((path, e.mode))
            continue
        if e.hashed == "stat":
            skipped.append(f"cannot restore large ignored {path!r} (hashed by size+mtime, not copied)")
            continue
        if cur is not None and cur.kind != e.kind:
            extra.append(path)
        fetch.append(path)
    return _RepairPlan(extra, fetch, chmod, skipped)


def _remove_paths(ctx: ToolContext, top: str, extra: list[str]) -> list[str]:
    """Remove the paths the backup did not have (or had as another kind), deepest first."""
    if not extra:
        return []
    # deepest first, so a folder is empty (or gone) by the time it is removed
    gone = sorted({decode_name(p) for p in extra}, key=lambda b: -b.count(b"/"))
    ctx.host.run(Raw(f"cd {shlex.quote(top)} && xargs -0 rm -rf --"), stdin=b"".join(p + b"\0" for p in gone))
    return [f"removed {len(gone)} paths the backup did not have"]


def _extract_paths(ctx: ToolContext, top: str, bdir: str, fetch: list[str]) -> list[str]:
    """Rewrite the changed or missing paths bytes-exact from exact.tar, shallowest first."""
    if not fetch:
        return []
    q = shlex.quote
    names = sorted((decode_name(p) for p in fetch), key=lambda b: b.count(b"/"))
    ctx.host.run(Raw(f"tar -xpf {q(bdir + '/exact.tar')} -C {q(top)} --null --no-recursion -T -"),
                 stdin=b"".join(n + b"\0" for n in names), timeout=1800)
    return [f"rewrote {len(names)} paths from exact.tar"]


def _restore_modes(ctx: ToolContext, top: str, chmod: list[tuple[str, int]], saved: Manifest,
                   fetch: list[str]) -> list[str]:
    """Set the modes that alone differ, then those of the folders extracted (extracting into one keeps its mode)."""
    q = shlex.quote
    for path, mode in chmod:
        ctx.host.run(Raw(f"cd {q(top)} && xargs -0 chmod {mode:o} --"), stdin=decode_name(path) + b"\0")
    fetched = set(fetch)
    for d in [e for e in saved.entries if e.kind == "dir"]:  # extracting into a folder keeps its mode; check all
        if d.path in fetched:
            ctx.host.run(Raw(f"cd {q(top)} && xargs -0 chmod {d.mode:o} --"), stdin=decode_name(d.path) + b"\0")
    return [f"modes of {len(chmod)} paths"] if chmod else []


def _restore_index(ctx: ToolContext, gdir: str, bdir: str, saved: Manifest, now: Manifest) -> list[str]:
    """Copy index.raw back when any repository's index differs from the saved one."""
    if [g.index for g in saved.git] == [g.index for g in now.git]:
        return []
    ctx.host.run(["cp", "-p", "--", f"{bdir}/index.raw", f"{gdir}/index"])
    return ["index (with its assume-unchanged / skip-worktree / intent-to-add flags) from index.raw"]


def make_backup(ctx: ToolContext, args: BackupInput) -> Backup:
    """Write a new backup (refuses if the id exists); the ref is written last, so it exists only when complete.

    The backup is a commit whose tree is the whole working tree (tracked + untracked, via a throwaway
    index), with parents HEAD, a commit of the real index and every stash entry (kept reachable); its
    message is the metadata JSON, copied with state.tar.gz and worktree.patch to ~/.specdoctor/backups/<id>/.
    """
    repo = args.repo
    bid = _sanitize(args.backup_id) if args.backup_id else run_backup_id(ctx)
    ref = BACKUP_NS + bid
    if ctx.host.run(git(repo, "rev-parse", "--verify", "-q", ref), check="ignore").ok:
        raise ToolRetry(f"backup {bid} already exists in {repo}; restore it or choose another id")
    head, _branch, gdir = check_mutable(ctx, repo, submodules_ok=True)
    top = _toplevel(ctx, repo)
    pending = split_z(ctx.host.run(git(repo, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=d",
                                       "HEAD")).stdout)
    pending += split_z(ctx.host.run(git(repo, "ls-files", "--others", "--exclude-standard", "-z")).stdout)
    exact = take_manifest(ctx, top)  # every path, mode and index flag: what a restore must give back
    need_kb = (2 * _bytes_of(ctx, top, pending) + exact.bytes_hashed) // 1024 + args.reserve_mb * 1024
    bdir = f"{ctx.state_dir}/backups/{bid}"
    for where in (gdir, ctx.host.home()):
        free = _free_kb(ctx, where)
        if free is not None and free < need_kb:
            raise BackupError(f"not enough free disk for a backup on {ctx.host.name}:{where} ({free} KiB free, "
                              f"{need_kb} KiB needed); nothing was changed")
    try:
        snap = snapshot(ctx, repo, args.include_ignored)
        env = {**_IDENT}
        icommit = ctx.host.run(git(repo, "commit-tree", snap.index_tree, "-p", head, "-m",
                                   f"specdoctor index {bid}"), env=env).stdout.strip()
        changed = [p for _s, p in _changed(ctx, repo, head, snap.worktree_tree)]
        meta = {"specdoctor_backup": 1, "backup_id": bid, "repo": repo, "toplevel": top, "head": head,
                "branch": snap.branch, "index_tree": snap.index_tree, "worktree_tree": snap.worktree_tree,
                "stashes": [s.model_dump() for s in snap.stashes], "untracked": snap.untracked[:5000],
                "changed": changed[:5000], "hash": snap.hash, "include_ignored": args.include_ignored, "manifest": exact.digest,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "dir": bdir}
        parents = ["-p", head, "-p", icommit] + [x for s in snap.stashes for x in ("-p", s.sha)]
        commit = ctx.host.run(git(repo, "commit-tree", snap.worktree_tree, *parents, "-m",
                                  json.dumps(meta, indent=1)), env=env).stdout.strip()
        q = shlex.quote
        ctx.host.run(["mkdir", "-p", bdir])
        files = [p for p in changed if p in set(pending)]
        # names git printed lossily (not UTF-8) are skipped here: exact.tar below holds them bytes-exact
        script = (f"cd {q(top)} && tar --null --ignore-failed-read --sparse -T - -czf {q(bdir + '/state.tar.gz')} && "
                  f"git --no-pager diff --binary --no-renames HEAD > {q(bdir + '/worktree.patch')} && "
                  f"git --no-pager diff --cached --binary --no-renames > {q(bdir + '/index.patch')}")
        ctx.host.run(Raw(script), stdin="".join(f"{p}\x00" for p in files).encode("utf-8", "surrogateescape"),
                     timeout=600)
        ctx.host.put((json.dumps(meta, indent=1) + "\n").encode(), f"{bdir}/meta.json")
        _write_exact(ctx, top, gdir, bdir, exact)
        ctx.host.run(git(repo, "update-ref", "-m", f"specdoctor backup {bid}", ref, commit, "0" * 40))
    except CommandFailed as exc:
        ctx.host.run(["rm", "-rf", "--", bdir], check="ignore")
        raise BackupError(f"writing backup {bid} failed ({exc.result.stderr.strip()[:200] or exc}); "
                          "the checkout was not changed") from None
    return Backup(backup_id=bid, repo=repo, ref=ref, commit=commit, head=head, branch=snap.branch,
                  detached=snap.branch is None, index_tree=snap.index_tree, worktree_tree=snap.worktree_tree,
                  stashes=snap.stashes, untracked=snap.untracked, changed=changed, hash=snap.hash,
                  include_ignored=args.include_ignored, dir=bdir, created=meta["created"], manifest=exact.digest)


def load_backup(ctx: ToolContext, repo: str, backup_id: str) -> Backup:
    """Read a backup back from its ref alone (works from any later process)."""
    bid = _sanitize(backup_id)
    ref = BACKUP_NS + bid
    res = ctx.host.run(git(repo, "rev-parse", "--verify", "-q", ref + "^{commit}"), check="ignore")
    if not res.ok:
        raise BackupError(f"no backup {bid} in {repo} (see `specdoctor restore --list`)")
    commit = res.stdout.strip()
    body = ctx.host.run(git(repo, "log", "-1", "--format=%B", commit)).stdout
    try:
        meta = json.loads(body)
    except ValueError:
        raise BackupError(f"backup {bid} has unreadable metadata") from None
    return Backup(backup_id=bid, repo=repo, ref=ref, commit=commit, head=meta["head"], branch=meta["branch"],
                  detached=meta["branch"] is None, index_tree=meta["index_tree"],
                  worktree_tree=meta["worktree_tree"], stashes=[StashEntry(**s) for s in meta["stashes"]],
                  untracked=meta.get("untracked", []), changed=meta.get("changed", []), hash=meta["hash"],
                  include_ignored=meta.get("include_ignored", False), dir=meta.get("dir"),
                  created=meta.get("created", ""), manifest=meta.get("manifest"))


def ensure_backup(ctx: ToolContext, repo: str, backup_id: str | None = None) -> Backup:
    """This run's backup (or the named one): reused when it exists (never overwritten), else written now."""
    bid = _sanitize(backup_id) if backup_id else run_backup_id(ctx)
    key = f"worktree:backup:{repo}:{bid}"
    ctx.host.run(git(repo, "update-ref", "-d", RESTORED_NS + bid), check="ignore")  # about to change files again
    if key in ctx.cache:
        return ctx.cache[key]
    try:
        backup = load_backup(ctx, repo, bid)
        backup.reused = True
    except BackupError:
        backup = make_backup(ctx, BackupInput(repo=repo, backup_id=bid))
    ctx.cache[key] = backup
    return backup


@tool(effect="mutate")
def backup_worktree(ctx: ToolContext, args: BackupInput) -> Backup:
    """Record the exact state of a checkout (HEAD, index, tracked + untracked files, stash list) before any change.

    Writes `refs/specdoctor/backups/<id>` plus state.tar.gz, worktree.patch and meta.json under
    ~/.specdoctor/backups/<id>/ on the host, with a content hash; refuses when the disk is too full.
    An existing backup for this run is returned as is, never overwritten.
    """
    if args.backup_id is None:
        try:
            found = load_backup(ctx, args.repo, run_backup_id(ctx))
            found.reused = True
            return found
        except BackupError:
            pass
    return make_backup(ctx, args)


def _clear_stale_lock(ctx: ToolContext, gdir: str) -> None:
    ctx.host.run(["find", gdir, "-maxdepth", "1", "-name", "specdoctor-index-*", "-mmin", "+30", "-delete"],
                 check="ignore")  # throwaway indexes left by a dropped connection
    lock = f"{gdir}/index.lock"
    for _ in range(10):
        if not ctx.host.exists(lock):
            return
        time.sleep(0.2)
    if not ctx.host.run(["pgrep", "-u", ctx.host.run(["id", "-u"]).stdout.strip(), "-x", "git"], check="ignore").ok:
        ctx.host.run(["rm", "-f", "--", lock])  # left by a git process killed with the connection


def clean_to_head(ctx: ToolContext, repo: str, include_ignored: bool = False) -> None:
    """Tracked files and index back to HEAD, untracked (not ignored) files removed; stashes untouched."""
    _head, _branch, gdir, _busy = repo_state(ctx, repo)
    _clear_stale_lock(ctx, gdir)
    ctx.host.run(git(repo, "reset", "-q", "--hard", "HEAD"), timeout=600)
    ctx.host.run(git(repo, "clean", "-fdq" + ("x" if include_ignored else "")), timeout=600)


def _changed_raw(ctx: ToolContext, repo: str, a: str, b: str) -> list[tuple[str, bytes]]:
    """(status, path bytes) between two trees: names carried bytes-exact (base64), not decoded."""
    res = ctx.host.run(["bash", "-c", 'set -o pipefail; "$@" | base64 -w0', "b64",
                        *git(repo, "diff-tree", "-r", "-z", "--no-renames", "--name-status", a, b)])
    parts = [x for x in base64.b64decode(res.stdout.strip() or b"").split(b"\0") if x]
    return [(parts[i].decode()[:1], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]


def write_paths_from(ctx: ToolContext, repo: str, head: str, tree: str, paths: list[str] | None = None) -> None:
    """Make the working tree's `paths` (default: all that differ) equal to `tree`'s, starting from a clean HEAD."""
    top = _toplevel(ctx, repo)
    _h, _b, gdir, _busy = repo_state(ctx, repo)
    changes = _changed_raw(ctx, repo, head, tree)
    if paths is not None:
        wanted = set(paths)
        changes = [(s, p) for s, p in changes if p.decode("utf-8", "replace") in wanted]
    gone = [p for s, p in changes if s == "D"]
    if gone:
        ctx.host.run(Raw(f"cd {shlex.quote(top)} && xargs -0 rm -f --"), stdin=b"".join(p + b"\0" for p in gone))
    keep = [p for s, p in changes if s != "D"]
    if keep:
        tmp = f"{gdir}/specdoctor-index-{secrets.token_hex(6)}"
        env = {"GIT_INDEX_FILE": tmp}
        try:  # a throwaway index: the real one is not touched
            ctx.host.run(git(top, "read-tree", tree), env=env)
            ctx.host.run(git(top, "checkout-index", "-f", "-q", "-z", "--stdin"), env=env,
                         stdin=b"".join(p + b"\0" for p in keep), timeout=600)
        finally:
            ctx.host.run(["rm", "-f", "--", tmp], check="ignore")


class RestoreInput(BaseModel):
    """Arguments of restore_worktree."""

    repo: str = Field(description="Path of the git checkout on the host.")
    backup_id: str | None = Field(default=None, description="Default: this run's backup.")
    force_head: bool = Field(default=False, description="Also move HEAD back if it changed since the backup.")


class Restored(BaseModel):
    """The outcome of a restore, with the verified hash."""

    backup_id: str
    expected_hash: str
    actual_hash: str
    verified: bool
    changed_anything: bool
    safety_ref: str | None = Field(default=None, description="Where the pre-restore state was kept.")
    actions: list[str] = Field(default_factory=list)
    manifest_expected: str | None = Field(default=None, description="File-level manifest digest at backup time.")
    manifest_actual: str | None = Field(default=None, description="File-level manifest digest after the restore.")
    manifest_verified: bool | None = Field(default=None, description="None for a backup taken without a manifest.")

    def summary_line(self) -> str:
        files = "" if self.manifest_verified is None else (
            f"; manifest {(self.manifest_actual or '')[:12]} {'identical' if self.manifest_verified else 'DIFFERS'}")
        return (f"restored {self.backup_id}: hash {self.actual_hash[:12]} "
                f"{'verified' if self.verified else 'MISMATCH'}{files}" +
                ("" if self.changed_anything else " (no change)"))


def _restore_stashes(ctx: ToolContext, repo: str, want: list[StashEntry]) -> None:
    ctx.host.run(git(repo, "update-ref", "-d", "refs/stash"), check="ignore")
    for entry in reversed(want):
        ctx.host.run(git(repo, "stash", "store", "-q", "-m", entry.subject, entry.sha))


def restore(ctx: ToolContext, repo: str, backup_id: str, force_head: bool = False) -> Restored:
    """Put the checkout back exactly as the backup recorded it, then verify the hash (BackupError if not equal)."""
    b = load_backup(ctx, repo, backup_id)
    head, branch, gdir = check_mutable(ctx, repo, submodules_ok=True)
    _clear_stale_lock(ctx, gdir)
    cur = snapshot(ctx, repo, b.include_ignored)
    out = Restored(backup_id=b.backup_id, expected_hash=b.hash, actual_hash=cur.hash, verified=cur.hash == b.hash,
                   changed_anything=False)
    if out.verified:
        return _mark_restored(ctx, repo, b, _exact(ctx, repo, b, gdir, out))
    safety = SAFETY_NS + f"{b.backup_id}-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(2)}"
    scommit = ctx.host.run(git(repo, "commit-tree", cur.worktree_tree, "-p", head, "-m",
                               f"specdoctor pre-restore state of {b.backup_id}"), env=_IDENT).stdout.strip()
    ctx.host.run(git(repo, "update-ref", safety, scommit))
    out.safety_ref, out.changed_anything = safety, True
    if head != b.head or branch != b.branch:
        if not force_head:
            raise RepoRefused(f"{repo}: HEAD is {branch or 'detached'}@{head[:10]} but the backup was taken at "
                              f"{b.branch or 'detached'}@{b.head[:10]}; re-run with --force-head to move it back")
        if b.branch:
            ctx.host.run(git(repo, "update-ref", f"refs/heads/{b.branch}", b.head))
            ctx.host.run(git(repo, "symbolic-ref", "HEAD", f"refs/heads/{b.branch}"))
        else:
            ctx.host.run(git(repo, "update-ref", "--no-deref", "HEAD", b.head))
        out.actions.append(f"moved HEAD back to {b.branch or 'detached'}@{b.head[:10]}")
    clean_to_head(ctx, repo, b.include_ignored)
    write_paths_from(ctx, repo, b.head, b.worktree_tree)
    out.actions.append(f"working tree set to {b.worktree_tree[:10]} ({len(b.changed)} paths)")
    ctx.host.run(git(repo, "read-tree", b.index_tree))
    ctx.host.run(git(repo, "update-index", "-q", "--refresh"), check="ignore")
    out.actions.append(f"index set to {b.index_tree[:10]}")
    if [s.sha for s in cur.stashes] != [s.sha for s in b.stashes]:
        _restore_stashes(ctx, repo, b.stashes)
        out.actions.append(f"stash list restored ({len(b.stashes)} entries)")
    out = _exact(ctx, repo, b, gdir, out)
    after = snapshot(ctx, repo, b.include_ignored)
    out.actual_hash, out.verified = after.hash, after.hash == b.hash
    if not out.verified and not out.manifest_verified:
        what = [n for n, x, y in (("HEAD", after.head, b.head), ("index", after.index_tree, b.index_tree),
                                  ("working tree", after.worktree_tree, b.worktree_tree),
                                  ("stash list", [s.sha for s in after.stashes], [s.sha for s in b.stashes]))
                if x != y]
        raise BackupError(f"restore of {b.backup_id} could not be verified: {', '.join(what)} differ; the state "
                          f"before this restore is kept at {safety}")
    return _mark_restored(ctx, repo, b, out)


def _exact(ctx: ToolContext, repo: str, b: Backup, gdir: str, out: Restored) -> Restored:
    """Finish with the file-level manifest: repair what git's view misses, then verify path for path."""
    if not b.manifest or not b.dir or not ctx.host.exists(f"{b.dir}/manifest.json"):
        return out
    saved, after, done = _repair_from_manifest(ctx, _toplevel(ctx, repo), gdir, b.dir)
    out.actions += done
    out.changed_anything |= bool(done)
    out.manifest_expected, out.manifest_actual = saved.digest, after.digest
    out.manifest_verified = after.digest == saved.digest
    if not out.manifest_verified:
        diff = saved.diff(after, limit=5)
        raise BackupError(f"restore of {b.backup_id}: the checkout differs from its manifest ({len(diff.differences)} "
                          f"differences, first: {diff.differences[0] if diff.differences else '?'})"
                          + (f"; the state before this restore is kept at {out.safety_ref}" if out.safety_ref else ""))
    return out


def _mark_restored(ctx: ToolContext, repo: str, b: Backup, out: Restored) -> Restored:
    ctx.host.run(git(repo, "update-ref", RESTORED_NS + b.backup_id, b.commit))
    return out


@tool(effect="mutate")
def restore_worktree(ctx: ToolContext, args: RestoreInput) -> Restored:
    """Put a checkout back byte-identical to a backup (tracked, staged, untracked, stash list) and verify the hash.

    Refuses mid-merge/rebase or with conflicts. The state found before restoring is itself kept under
    refs/specdoctor/pre-restore/ so a restore never loses work.
    """
    return restore(ctx, args.repo, args.backup_id or run_backup_id(ctx), args.force_head)


def list_backups(ctx: ToolContext, repo: str) -> list[BackupInfo]:
    """Every backup in the repo, newest first, with whether it was restored since."""
    res = ctx.host.run(git(repo, "for-each-ref", "--sort=-creatordate",
                           f"--format={REF_MARKER}%(refname)%00%(objectname)%00%(contents)", "refs/specdoctor/"))
    return parse_backup_refs(res.stdout, BACKUP_NS, RESTORED_NS)


class StashInput(BaseModel):
    """Arguments of stash_all."""

    repo: str = Field(description="Path of the git checkout on the host.")
    backup_id: str | None = Field(default=None, description="Default: this run's backup (taken if missing).")


class Stashed(BaseModel):
    """The checkout after stash_all: clean at HEAD, everything kept in the run's backup."""

    backup_id: str
    head: str
    reverted: list[str] = Field(default_factory=list, description="Paths that were put back to HEAD or removed.")
    clean: bool
    stash_list_unchanged: bool

    def summary_line(self) -> str:
        return (f"stashed {len(self.reverted)} paths into backup {self.backup_id}; tree "
                f"{'clean' if self.clean else 'NOT clean'} at {self.head[:10]}")


def _stash_shas(ctx: ToolContext, repo: str) -> list[str]:
    return [s.sha for s in parse_stash_list(ctx.host.run(git(repo, "stash", "list", "--format=%H%x00%gs"),
                                                         check="ignore").stdout)]


@tool(effect="mutate")
def stash_all(ctx: ToolContext, args: StashInput) -> Stashed:
    """Set every change aside (tracked, staged, untracked) so the checkout is clean at HEAD; the user's stashes stay.

    The changes are held by this run's backup ref (taken first if missing), not by a `git stash` entry,
    so the user's stash list is never touched; `restore_worktree` puts everything back.
    """
    check_mutable(ctx, args.repo)  # in place: a submodule's local changes are not in the backup, so refuse
    b = ensure_backup(ctx, args.repo, args.backup_id)
    before = _stash_shas(ctx, args.repo)
    clean_to_head(ctx, args.repo, b.include_ignored)
    after = _stash_shas(ctx, args.repo)
    return Stashed(backup_id=b.backup_id, head=b.head, reverted=b.changed, clean=not ctx.host.run(git(args.repo, "status", "--porcelain=v1", "-z",
                                                       "--untracked-files=all")).stdout,
                   stash_list_unchanged=before == after)


class ApplyInput(BaseModel):
    """Arguments of apply_patches."""

    repo: str = Field(description="Path of the git checkout on the host.")
    files: list[str] = Field(default_factory=list, description="Catalogued paths whose whole patch is re-applied.")
    hunks: dict[str, list[int]] = Field(default_factory=dict, description="path → hunk indices (catalog order).")
    script: str | None = Field(default=None, description="A user's patch script on the host, run after the files.")
    script_args: list[str] = Field(default_factory=list)
    python: str = Field(default="python3", description="Interpreter for the script.")
    from_clean: bool = Field(default=False, description="First reset to a clean HEAD (the backup holds it all).")
    backup_id: str | None = Field(default=None, description="Default: this run's backup (taken if missing).")
    timeout_s: float = Field(default=600, gt=0)


class ScriptChange(BaseModel):
    """A path the patch script changed, compared with the user's own version in the backup."""

    path: str
    vs_backup: str = Field(description="matches-backup / differs-from-backup / not-in-backup")


class Applied(BaseModel):
    """What apply_patches did and whether the tree is what was asked for."""

    backup_id: str
    applied: list[str] = Field(default_factory=list, description="Every path patched (files and hunks).")
    applied_files: list[str] = Field(default_factory=list)
    applied_hunks: dict[str, list[int]] = Field(default_factory=dict)
    script_exit: int | None = None
    script_output: str | None = Field(default=None, description="Last 4000 characters of the script's output.")
    ambiguous: list[Ambiguous] = Field(default_factory=list)
    script_changed: list[ScriptChange] = Field(default_factory=list)
    verified: bool
    mismatches: list[str] = Field(default_factory=list)
    tree: str = Field(description="The resulting working tree as a git tree id.")

    def summary_line(self) -> str:
        amb = f"; {len(self.ambiguous)} ambiguous script lines" if self.ambiguous else ""
        return (f"applied {len(self.applied_files)} files, {sum(map(len, self.applied_hunks.values()))} hunks"
                f"{' + script' if self.script_exit is not None else ''}{amb}; "
                f"{'verified' if self.verified else 'NOT as asked: ' + '; '.join(self.mismatches)[:200]}")


def _apply_hunks(ctx: ToolContext, repo: str, top: str, b: Backup, path: str, wanted: list[int]) -> list[str]:
    diff = ctx.host.run(git(repo, "diff", "--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/",
                            "--dst-prefix=b/", b.head, b.commit, "--", path)).stdout
    try:
        patch, lines = select_hunks(diff, wanted)
    except ValueError as exc:
        raise ToolRetry(f"{path} in backup {b.backup_id}: {exc}") from None
    res = ctx.host.run(git(top, "apply", "--whitespace=nowarn", "-"), stdin=patch.encode(), check="ignore")
    if not res.ok:
        raise Unresolved(f"patch conflict applying hunks {wanted} of {path}: {res.stderr.strip()[:300]}")
    return lines


@tool(effect="mutate")
def apply_patches(ctx: ToolContext, args: ApplyInput) -> Applied:
    """Re-apply a chosen subset of the catalogued patches (whole files or single hunks) and/or run a patch script.

    The run's backup (taken first if missing) holds the user's versions; with from_clean the tree is
    first reset to HEAD. It writes the chosen files from the backup, applies chosen hunks with `git apply`, then runs the script
    with the given python and flags WARN / SKIP / ERROR / 'could not find' lines and a non-zero exit as
    ambiguous. Finally it checks that the tree is what was asked for (with from_clean: nothing else changed).
    """
    repo = args.repo
    check_mutable(ctx, repo)  # in place: a submodule's local changes are not in the backup, so refuse
    b = ensure_backup(ctx, repo, args.backup_id)
    unknown = [p for p in [*args.files, *args.hunks] if p not in b.changed]
    if unknown:
        raise ToolRetry(f"not catalogued patches of backup {b.backup_id}: {', '.join(unknown[:5])}")
    top = _toplevel(ctx, repo)
    _h, _b, gdir, _busy = repo_state(ctx, repo)
    if args.from_clean:
        clean_to_head(ctx, repo, b.include_ignored)
    if args.files:
        write_paths_from(ctx, repo, b.head, b.worktree_tree, args.files)
    hunk_lines = {p: _apply_hunks(ctx, repo, top, b, p, idx) for p, idx in args.hunks.items() if idx}
    out = Applied(backup_id=b.backup_id, applied_files=args.files, applied_hunks=args.hunks, verified=False, tree="",
                  applied=list(dict.fromkeys([*args.files, *args.hunks])))
    before = _tree_of_worktree(ctx, repo, gdir, False)
    if args.script:
        _run_script(ctx, args, args.script, top, out)
        out.tree = _tree_of_worktree(ctx, repo, gdir, False)
        out.script_changed = _script_changes(ctx, repo, b, before, out.tree)
    else:
        out.tree = before
    out.mismatches += _files_mismatches(ctx, repo, b, before, args.files)
    out.mismatches += _hunks_mismatches(ctx, repo, b, before, hunk_lines)
    if args.from_clean:
        out.mismatches += _unasked_changes(ctx, repo, b, before, set(args.files) | set(hunk_lines))
    out.verified = not out.mismatches
    return out


def _run_script(ctx: ToolContext, args: ApplyInput, script: str, top: str, out: Applied) -> None:
    """Run the user's patch script in the checkout; keep its exit, its output's tail and its ambiguous lines."""
    res = ctx.host.run(script_command(ctx, script, args.python, args.script_args), cwd=top, check="ignore",
                       timeout=args.timeout_s)
    text = res.stdout + ("\n" + res.stderr if res.stderr.strip() else "")
    out.script_exit, out.script_output = res.exit, text[-4000:]
    out.ambiguous = ambiguous_lines(text, res.exit)


def _script_changes(ctx: ToolContext, repo: str, b: Backup, before: str, after: str) -> list[ScriptChange]:
    """Each path the script changed, compared with the user's own version in the backup."""
    touched = [p for _s, p in _changed(ctx, repo, before, after)]
    differ = set(split_z(ctx.host.run(git(repo, "diff-tree", "-r", "-z", "--name-only", b.worktree_tree,
                                          after, "--", *touched)).stdout)) if touched else set()
    return [ScriptChange(path=p, vs_backup="not-in-backup" if p not in b.changed else
                         "differs-from-backup" if p in differ else "matches-backup")
            for p in touched]


def _files_mismatches(ctx: ToolContext, repo: str, b: Backup, before: str, files: list[str]) -> list[str]:
    """The whole files written that differ from the backup's version."""
    if not files:
        return []
    off = split_z(ctx.host.run(git(repo, "diff-tree", "-r", "-z", "--name-only", b.worktree_tree, before, "--",
                                   *files)).stdout)
    return [f"{p} differs from the backup's version" for p in off]


def _hunks_mismatches(ctx: ToolContext, repo: str, b: Backup, before: str,
                      hunk_lines: dict[str, list[str]]) -> list[str]:
    """The files whose changed lines against HEAD are not exactly those of the hunks asked for."""
    out: list[str] = []
    for path, lines in hunk_lines.items():
        now = ctx.host.run(git(repo, "diff", "--no-color", "--no-renames", b.head, before, "--", path)).stdout
        got = [ln.value for pf in unidiff.PatchSet(now) for h in pf for ln in h if ln.is_added or ln.is_removed]
        if sorted(got) != sorted(lines):
            out.append(f"{path}: the applied hunks do not match the ones asked for")
    return out


def _unasked_changes(ctx: ToolContext, repo: str, b: Backup, before: str, expect: set[str]) -> list[str]:
    """From a clean HEAD: the paths changed although not asked for."""
    extra = [p for _s, p in _changed(ctx, repo, b.head, before) if p not in expect]
    return [f"{p} changed although not asked for" for p in extra]
