"""A file-level manifest of a checkout (every path, mode, hash, the index with its flags, HEAD, stashes) and its diff."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.errors import ToolRetry
from specdoctor.toolkit import ToolContext, tool

__all__ = ["ManifestEntry", "IndexEntry", "GitFacts", "Manifest", "ManifestDiff", "ManifestInput", "take_manifest",
           "checkout_manifest", "decode_name", "encode_name", "DEFAULT_BIG_BYTES"]

DEFAULT_BIG_BYTES = 32 << 20
"""Ignored files above this size are hashed by size+mtime (listed as such); content hashes on demand."""


def encode_name(raw: bytes) -> str:
    """The manifest's bytes-safe name: UTF-8 text as is, anything else (or a "b64:" lookalike) as b64:<base64>."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "b64:" + base64.b64encode(raw).decode()
    return "b64:" + base64.b64encode(raw).decode() if text.startswith("b64:") else text


def decode_name(name: str) -> bytes:
    """The bytes on disk of a manifest name."""
    return base64.b64decode(name[4:]) if name.startswith("b64:") else name.encode("utf-8")


class ManifestEntry(BaseModel):
    """One path under the checkout (the .git folders excepted: they are described by GitFacts)."""

    path: str = Field(description="Relative path; non-UTF-8 names as b64:<base64 of the bytes>.")
    kind: Literal["file", "dir", "symlink", "other"]
    mode: int = Field(description="All permission bits (st_mode & 0o7777).")
    size: int = 0
    sha256: str | None = Field(default=None, description="Content sha256; 'stat:SIZE:MTIME_NS' when hashed by stat.")
    hashed: Literal["content", "stat", "none"] = "none"
    target: str | None = Field(default=None, description="Symlink target.")
    status: Literal["tracked", "untracked", "ignored"]


class IndexEntry(BaseModel):
    """One index entry with the flags `git status` does not show."""

    path: str
    mode: str
    sha: str
    stage: int
    flags: list[str] = Field(default_factory=list, description="assume-unchanged / skip-worktree / intent-to-add")


class GitFacts(BaseModel):
    """What git holds for one repository of the checkout (the top one, nested repos, submodules)."""

    path: str = Field(description="The repository's folder relative to the checkout ('' for the checkout).")
    head: str | None
    branch: str | None
    index: list[IndexEntry] = Field(default_factory=list)
    stashes: list[str] = Field(default_factory=list)
    refs: dict[str, str] = Field(default_factory=dict)
    own_refs: dict[str, str] = Field(default_factory=dict, description="refs/specdoctor/* (not in the digest).")
    worktrees: list[str] = Field(default_factory=list)
    config_sha: str | None = None
    exclude_sha: str | None = None


class ManifestDiff(BaseModel):
    """What differs between two manifests, one line per difference."""

    same: bool
    before: str
    after: str
    differences: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        if self.same:
            return f"manifest identical ({self.before[:16]})"
        return (f"manifest differs ({self.before[:16]} → {self.after[:16]}): {len(self.differences)} differences, "
                f"first: {self.differences[0] if self.differences else '?'}")


class Manifest(BaseModel):
    """The checkout's exact state; `digest` is sha256 over everything but own_refs and the counters."""

    repo: str
    top: str
    entries: list[ManifestEntry] = Field(default_factory=list)
    git: list[GitFacts] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list, description="Paths that could not be read (never silent).")
    stat_hashed: int = Field(default=0, description="Ignored files above big_bytes hashed by size+mtime.")
    content_hashed: int = 0
    bytes_hashed: int = 0
    big_bytes: int = DEFAULT_BIG_BYTES
    digest: str = ""

    def compute_digest(self) -> str:
        body = {"entries": [e.model_dump() for e in self.entries],
                "git": [g.model_dump(exclude={"own_refs"}) for g in self.git], "problems": self.problems}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def summary_line(self) -> str:
        top = next((g for g in self.git if g.path == ""), None)
        where = (top.branch or "detached") if top else "?"
        return (f"manifest {self.digest[:16]} of {self.repo}: {len(self.entries)} paths, "
                f"{sum(len(g.index) for g in self.git)} index entries, {len(self.git)} repos on {where}; "
                f"{self.stat_hashed} large ignored files hashed by size+mtime")

    def diff(self, after: Manifest, limit: int = 200) -> ManifestDiff:
        """Name every difference (path added/removed, kind, mode, size, content, target, status, git facts)."""
        out = _entries_differences(self.entries, after.entries) + _git_differences(self.git, after.git)
        if self.problems != after.problems:
            out.append(f"unreadable paths: {self.problems[:5]} → {after.problems[:5]}")
        more = len(out) - limit
        out = out[:limit] + ([f"... {more} more"] if more > 0 else [])
        return ManifestDiff(same=self.digest == after.digest and not out, before=self.digest, after=after.digest,
                            differences=out)


def _entry_change(path: str, x: ManifestEntry, y: ManifestEntry) -> str:
    """One line naming what changed on a path present in both manifests (its fields, then 'content')."""
    fields = [f"{k} {getattr(x, k)!r} → {getattr(y, k)!r}" if k != "mode" else
              f"mode {x.mode:04o} → {y.mode:04o}" for k in ("kind", "mode", "size", "target", "status")
              if getattr(x, k) != getattr(y, k)]
    if x.sha256 != y.sha256:
        fields.append("content")
    return f"{path!r}: {', '.join(fields)}"


def _entries_differences(before: list[ManifestEntry], after: list[ManifestEntry]) -> list[str]:
    """Paths added, removed or changed, in path order."""
    out: list[str] = []
    a, b = {e.path: e for e in before}, {e.path: e for e in after}
    for path in sorted(a.keys() | b.keys()):
        x, y = a.get(path), b.get(path)
        if x is None and y is not None:
            out.append(f"added {y.kind} {path!r}")
        elif y is None and x is not None:
            out.append(f"removed {x.kind} {path!r}")
        elif x is not None and y is not None and x != y:
            out.append(_entry_change(path, x, y))
    return out


def _git_differences(before: list[GitFacts], after: list[GitFacts]) -> list[str]:
    """Repositories appeared or disappeared, then each kept one's facts, refs and index, in repo order."""
    out: list[str] = []
    ga, gb = {g.path: g for g in before}, {g.path: g for g in after}
    for repo in sorted(ga.keys() | gb.keys()):
        x2, y2 = ga.get(repo), gb.get(repo)
        label = f"repo {repo!r}" if repo else "git"
        if x2 is None or y2 is None:
            out.append(f"{label}: {'appeared' if x2 is None else 'disappeared'}")
            continue
        out += _repo_facts_differences(label, x2, y2) + _index_differences(label, x2, y2)
    return out


def _repo_facts_differences(label: str, x2: GitFacts, y2: GitFacts) -> list[str]:
    """HEAD, branch, stashes, worktrees, config/exclude hashes, then each ref that moved."""
    out: list[str] = []
    for k in ("head", "branch", "stashes", "worktrees", "config_sha", "exclude_sha"):
        if getattr(x2, k) != getattr(y2, k):
            out.append(f"{label} {k}: {getattr(x2, k)!r} → {getattr(y2, k)!r}")
    for name in sorted(x2.refs.keys() | y2.refs.keys()):
        if x2.refs.get(name) != y2.refs.get(name):
            out.append(f"{label} ref {name}: {x2.refs.get(name)} → {y2.refs.get(name)}")
    return out


def _index_differences(label: str, x2: GitFacts, y2: GitFacts) -> list[str]:
    """Index entries added, removed or changed (mode, sha, flags), keyed by (path, stage)."""
    out: list[str] = []
    ia = {(i.path, i.stage): i for i in x2.index}
    ib = {(i.path, i.stage): i for i in y2.index}
    for key in sorted(ia.keys() | ib.keys()):
        i, j = ia.get(key), ib.get(key)
        if i != j:
            what = ("added" if i is None else "removed" if j is None else
                    ", ".join(f"{k} {getattr(i, k)} → {getattr(j, k)}" for k in ("mode", "sha", "flags")
                              if getattr(i, k) != getattr(j, k)))
            out.append(f"{label} index {key[0]!r}: {what}")
    return out


class ManifestInput(BaseModel):
    """Arguments of checkout_manifest."""

    repo: str = Field(description="Path of the git checkout on the host.")
    big_bytes: int = Field(default=DEFAULT_BIG_BYTES, ge=0,
                           description="Ignored files above this size are hashed by size+mtime.")
    content_all: bool = Field(default=False, description="Content-hash every file, large ignored ones too.")
    hash_paths: list[str] = Field(default_factory=list, description="Paths to content-hash whatever their size.")


def take_manifest(ctx: ToolContext, repo: str, *, big_bytes: int = DEFAULT_BIG_BYTES, content_all: bool = False,
                  hash_paths: list[str] | None = None, python: str = "python3") -> Manifest:
    """One round-trip: ship the walker, run it with the host's python3, parse; nothing on the host is written."""
    script = ctx.remote_script("checkout_manifest.py")
    opts = json.dumps({"big_bytes": big_bytes, "content_all": content_all, "hash_paths": hash_paths or []})
    res = ctx.host.run([python, script, repo, opts], check="ignore", timeout=1800)
    try:
        raw = json.loads(res.stdout)
    except ValueError:
        raise ToolRetry(f"cannot take a manifest of {repo} on {ctx.host.name}: "
                        f"{(res.stderr.strip().splitlines() or ['no output'])[-1][:200]}") from None
    if "error" in raw:
        raise ToolRetry(str(raw["error"])[:300])
    c = raw["counts"]
    m = Manifest(repo=repo, top=raw["top"], entries=[ManifestEntry(**e) for e in raw["entries"]],
                 git=[GitFacts(**g) for g in raw["git"]], problems=raw["problems"], stat_hashed=c["stat"],
                 content_hashed=c["content"], bytes_hashed=c["bytes_hashed"], big_bytes=raw["big_bytes"])
    m.digest = m.compute_digest()
    return m


@tool(effect="read")
def checkout_manifest(ctx: ToolContext, args: ManifestInput) -> Manifest:
    """File-level manifest of a checkout: every path, mode, hash, the index flags, HEAD, stashes; one digest.

    Every path (tracked, untracked, ignored, nested repos), kind, all mode bits, size, sha256, symlink target;
    the index with assume-unchanged / skip-worktree / intent-to-add flags; HEAD,
    branch, stash list, refs, worktrees; one digest over it all. Reads only (git runs without optional locks).
    """
    return take_manifest(ctx, args.repo, big_bytes=args.big_bytes, content_all=args.content_all,
                         hash_paths=args.hash_paths)
