"""The upstream range since the good run: its reference commit, and `git log --first-parent good..HEAD` triaged.

The good run is a point in history as well as a set of patches: its fingerprint records the commit it ran
(or the user names one with `good_ref`: a commit, a tag, or a date — the last first-parent commit before it).
Each commit of the range is catalogued like a patch: its files against its first parent (a merge's whole change),
their subsystems and whether they are on this server's hot path (the same rules as `triage_diffs`), and the PR
number from its subject. Read-only: the checkout is only asked, never changed.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field

from specdoctor.errors import NoData, ToolRetry
from specdoctor.toolkit import ToolContext, tool
from specdoctor.tools.checkout.repo import DiffFile, ServedConfig, _verdict, git, resolve_served

__all__ = ["CommitsInput", "CommitFile", "CommitRow", "CommitCatalog", "catalog_commits", "resolve_good_ref",
           "pr_number"]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?([+-]\d{2}:?\d{2}|Z)?)?$")
_PR = re.compile(r"\(#(\d+)\)|pull request #(\d+)|\bPR ?#(\d+)", re.I)
_SEP = "\x1f"


class CommitsInput(BaseModel):
    """Arguments of catalog_commits."""

    repo: str = Field(description="Path of the git checkout on the host.")
    good_ref: str | None = Field(default=None, description="The good run's commit: a sha, a tag or branch, or a "
                                 "date (YYYY-MM-DD[ HH:MM]: the last first-parent commit before it; a bare date is "
                                 "its midnight).")
    good_fingerprint: str | None = Field(default=None, description="The good run's fingerprint JSON on the host "
                                         "(its `commit` is the reference when good_ref is not given).")
    port: int | None = Field(default=None, description="The live server's port (its configuration decides the "
                             "hot path).")
    launch: str | None = Field(default=None, description="The launch line (fallback for the configuration).")
    max_commits: int = Field(default=2000, ge=1, description="Refuse longer ranges (a wrong reference).")


class CommitFile(BaseModel):
    """One file a commit changed, triaged."""

    path: str
    subsystem: str
    on_hot_path: bool | None
    reason: str


class CommitRow(BaseModel):
    """One first-parent commit of good..HEAD (index 1 = the oldest; 0 is the good commit itself)."""

    index: int
    sha: str
    subject: str
    date: str
    merge: bool = Field(description="A merge commit: its change is the whole side branch (vs its first parent).")
    pr: int | None = Field(default=None, description="The PR number in the subject, e.g. '(#13021)'.")
    files: list[CommitFile] = Field(default_factory=list)
    on_hot_path: bool = Field(default=False, description="Some file of it is on this server's hot path.")

    def label(self) -> str:
        return f"{self.sha[:10]} {self.subject}"


class CommitCatalog(BaseModel):
    """The range between the good run's commit and HEAD, oldest first."""

    repo: str
    good: str
    good_source: str = Field(description="Where the reference came from: '--good-ref REF' (the good_ref "
                             "argument) or 'the good fingerprint'.")
    head: str
    commits: list[CommitRow] = Field(default_factory=list)
    served: ServedConfig | None = None
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        hot = sum(c.on_hot_path for c in self.commits)
        return (f"reference commit: {self.good[:10]} (from {self.good_source}); {len(self.commits)} upstream commits "
                f"from it to HEAD {self.head[:10]}; {hot} touch this server's hot path")


def pr_number(subject: str) -> int | None:
    """The PR number a subject names: '(#123)', 'Merge pull request #123', 'PR #123'."""
    m = _PR.search(subject)
    return int(next(g for g in m.groups() if g)) if m else None


def resolve_good_ref(ctx: ToolContext, repo: str, ref: str) -> str:
    """A commit sha for a sha, tag, branch, or date (the last first-parent commit of HEAD before it)."""
    if _DATE.match(ref.strip()):
        # A bare date is its midnight (git alone would take the current time of day): the reference is then never
        # newer than the good run; an older one widens the range by a commit or two, it cannot hide the culprit.
        when = ref.strip() if len(ref.strip()) > 10 else f"{ref.strip()} 00:00:00"
        res = ctx.host.run(git(repo, "rev-list", "-1", "--first-parent", f"--before={when}", "HEAD"),
                           check="ignore")
        sha = res.stdout.strip()
        if not res.ok or not sha:
            raise ToolRetry(f"no commit of HEAD's first-parent line is older than {ref!r}")
        return sha
    res = ctx.host.run(git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"), check="ignore")
    if not res.ok or not res.stdout.strip():
        raise ToolRetry(f"{ref!r} is not a commit, tag or date known to {repo}")
    return res.stdout.strip()


def _fingerprint_commit(ctx: ToolContext, path: str) -> str | None:
    res = ctx.host.run(["cat", "--", path], check="ignore")
    if not res.ok:
        return None
    try:
        commit = json.loads(res.stdout).get("commit")
    except (ValueError, AttributeError):
        return None
    return str(commit) if commit else None


def _rows(ctx: ToolContext, repo: str, good: str, cap: int) -> list[CommitRow]:
    fmt = _SEP.join(["@@%H", "%P", "%cI", "%s"])
    res = ctx.host.run(git(repo, "log", "--first-parent", "--diff-merges=first-parent", "--name-only",
                           "--no-renames", f"--format={fmt}", f"{good}..HEAD"), timeout=300)
    rows: list[CommitRow] = []
    for block in res.stdout.split("@@")[1:]:
        head, _, rest = block.partition("\n")
        sha, parents, date, subject = (head.split(_SEP) + ["", "", ""])[:4]
        rows.append(CommitRow(index=0, sha=sha, subject=subject, date=date, merge=len(parents.split()) > 1,
                              pr=pr_number(subject),
                              files=[CommitFile(path=p, subsystem="", on_hot_path=None, reason="")
                                     for p in rest.splitlines() if p.strip()]))
        if len(rows) > cap:
            raise ToolRetry(f"more than {cap} commits between {good[:10]} and HEAD: is that the good run's commit?")
    rows.reverse()
    for i, r in enumerate(rows, 1):
        r.index = i
    return rows


@tool(effect="read")
def catalog_commits(ctx: ToolContext, args: CommitsInput) -> CommitCatalog:
    """List and triage the upstream commits between the good run's commit and HEAD (first parent, oldest first).

    The reference is `good_ref` (sha, tag or date) or the good fingerprint's `commit`; each commit's files against
    its first parent are triaged for this server's hot path, and its PR number read from the subject.
    """
    if args.good_ref:
        good, source = resolve_good_ref(ctx, args.repo, args.good_ref), f"--good-ref {args.good_ref}"
    else:
        recorded = _fingerprint_commit(ctx, args.good_fingerprint) if args.good_fingerprint else None
        if not recorded:
            raise NoData("no reference commit: neither good_ref nor a good fingerprint recording a commit")
        try:
            good, source = resolve_good_ref(ctx, args.repo, recorded), "the good fingerprint"
        except ToolRetry:  # a fingerprint from another checkout (a fleet's majority): no range here
            raise NoData(f"the good fingerprint's commit {recorded[:12]} is not in {args.repo}") from None
    head = ctx.host.run(git(args.repo, "rev-parse", "HEAD")).stdout.strip()
    anc = ctx.host.run(git(args.repo, "merge-base", "--is-ancestor", good, "HEAD"), check="ignore")
    if not anc.ok:
        raise NoData(f"the good run's commit {good[:10]} is not an ancestor of HEAD {head[:10]}: no range to search")
    rows = _rows(ctx, args.repo, good, args.max_commits)
    out = CommitCatalog(repo=args.repo, good=good, good_source=source, head=head, commits=rows)
    if not rows:
        out.notes.append("HEAD is the good run's commit: no upstream change")
        return out
    served = resolve_served(ctx, args.port, args.launch)
    out.served = served
    for r in rows:
        for f in r.files:
            sub, _detail, on, reason = _verdict(ctx, args.repo, DiffFile(path=f.path, status="M"), served)
            f.subsystem, f.on_hot_path, f.reason = sub, on, reason
        r.on_hot_path = any(f.on_hot_path for f in r.files)
    return out
