"""Upstream history in the twin: commits on top of a scenario's base, laid out as a real git history.

People who run SGLang from a checkout `git pull` often; a scenario says which upstream commits came after its
base (files changed, a merge, an effect on the perf model through `perf.effects[].when.patches: [<commit id>]`,
a commit that breaks start-up, one that moves the line an essential local patch hangs off), and which of them the
good run was measured at. The sandbox commits them one by one (a merge is a side branch merged with `--no-ff`),
then leaves the local patches uncommitted on top, as before.

The stand-in tells a commit's presence in a tree the way it tells a patch's: every non-blank line its marker
change adds is in the file. A commit whose lines break start-up makes the server exit during start-up while
those lines are there (a later commit's `replace` takes them out again).
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specdoctor.errors import ScenarioError

__all__ = ["CommitChange", "UpstreamCommit", "twin_entries", "layout_history", "commit_date"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CommitChange(BaseModel):
    """One file edit of a commit: `add` inserted after the first line containing `after`, or replacing `replace`
    (an empty `add` with `replace` deletes), or a whole new file (`new_file`)."""

    model_config = ConfigDict(extra="forbid")
    file: str
    add: str = ""
    after: str | None = None
    replace: str | None = None
    new_file: bool = False


class UpstreamCommit(_Strict):
    """An upstream commit on top of the base (first-parent order, oldest first)."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Name used by effects, truth and "
                    "`good_commit`; never shown to specdoctor.")
    subject: str = Field(description="The commit's subject, e.g. '[Spec] fuse verify mask (#12345)'.")
    changes: list[CommitChange] = Field(min_length=1)
    merge: bool = Field(default=False, description="Made on a side branch and merged with --no-ff: the first-parent "
                        "line sees one merge commit (subject 'Merge pull request ...') carrying the change.")
    breaks_startup: str | None = Field(default=None, description="The server fails to start while this commit's "
                                       "marker lines are in the tree: the last line of its traceback.")
    tag: str | None = Field(default=None, description="A tag on this commit (e.g. v0.5.18).")

    @model_validator(mode="after")
    def _marker(self) -> UpstreamCommit:
        if self.breaks_startup and not self.marker():
            raise ValueError(f"commit {self.id}: breaks_startup needs a change that adds lines")
        return self

    def marker(self) -> CommitChange | None:
        """The change whose added lines tell that this commit is in a tree (the first one adding any)."""
        return next((c for c in self.changes if c.add.strip()), None)


def twin_entries(history: list[UpstreamCommit]) -> list[dict]:
    """The stand-in's view of the history: one presence entry per commit that adds lines (its id is what effects
    name), `breaks` when its lines stop the server from starting."""
    out = []
    for c in history:
        m = c.marker()
        if m is None:
            continue
        out.append({"id": c.id, "file": m.file, "add": m.add, "after": m.after, "essential": False,
                    "missing_error": None, "breaks": c.breaks_startup})
    return out


def commit_date(base: str, index: int) -> str:
    """Commit dates six hours apart after the base's (so `--good-ref <date>` finds a commit)."""
    return (datetime.fromisoformat(base) + timedelta(hours=6 * index)).isoformat()


def _git(repo: Path, *args: str, env: dict[str, str]) -> str:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise ScenarioError(f"git {' '.join(args)} failed: {res.stderr.strip()}")
    return res.stdout.strip()


def _edit(repo: Path, cid: str, ch: CommitChange) -> None:
    target = repo / ch.file
    if ch.new_file:
        if target.exists():
            raise ScenarioError(f"commit {cid}: new file {ch.file} already exists")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(ch.add if ch.add.endswith("\n") else ch.add + "\n")
        return
    if not target.exists():
        raise ScenarioError(f"commit {cid}: {ch.file} is not in the tree")
    text = target.read_text()
    if ch.replace is not None:
        if ch.replace not in text:
            raise ScenarioError(f"commit {cid}: text to replace not found in {ch.file}")
        target.write_text(text.replace(ch.replace, ch.add, 1))
        return
    add = ch.add if ch.add.endswith("\n") else ch.add + "\n"
    if ch.after is None:
        target.write_text(text + ("" if text.endswith("\n") or not text else "\n") + add)
        return
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if ch.after in line:
            target.write_text("".join(lines[: i + 1]) + add + "".join(lines[i + 1:]))
            return
    raise ScenarioError(f"commit {cid}: anchor {ch.after!r} not found in {ch.file}")


def layout_history(repo: Path, history: list[UpstreamCommit], env: dict[str, str], base_date: str
                   ) -> dict[str, str]:
    """Commit `history` on top of the checkout's HEAD (a merge through a side branch); id -> sha of the commit on
    the first-parent line (a merge's id names the merge commit)."""
    shas: dict[str, str] = {}
    for i, c in enumerate(history, 1):
        when = commit_date(base_date, i)
        cenv = {**env, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        if c.merge:
            _git(repo, "checkout", "-q", "-b", f"pr-{c.id}", env=cenv)
        for ch in c.changes:
            _edit(repo, c.id, ch)
        _git(repo, "add", "-A", env=cenv)
        _git(repo, "commit", "-q", "-m", c.subject, env=cenv)
        if c.merge:
            _git(repo, "checkout", "-q", "main", env=cenv)
            _git(repo, "merge", "-q", "--no-ff", "-m", f"Merge pull request from pr-{c.id}: {c.subject}",
                 f"pr-{c.id}", env=cenv)
            _git(repo, "branch", "-q", "-D", f"pr-{c.id}", env=cenv)
        shas[c.id] = _git(repo, "rev-parse", "HEAD", env=cenv)
        if c.tag:
            _git(repo, "tag", c.tag, env=cenv)
    return shas
