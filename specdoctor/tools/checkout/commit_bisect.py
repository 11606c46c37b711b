"""Commit bisection as a trial kind: a tree at commit C with the essential local patches carried, never the checkout.

Each trial tree is its own small repository at C borrowing the user's objects (as `trial_tree` builds HEAD's),
with the essential local patches re-applied three-way (`git apply --3way`: the patch's preimage blobs are the
user's HEAD, so a commit that moved the lines they hang off merges or conflicts as git would). A commit where they
do not apply, or where the server does not start, is skipped the way `git bisect skip` does and reported. The
search (`stats.history_search`) names the first bad commit only when confirmed both ways; its effect is the
parent's runs against its own [bootstrap CI], and the pair's phase profiles, taken on each probe's server while up
(tools.arm_profiles: any placed probe can end as the culprit or its parent), give the phase it moved.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import shlex
import statistics
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel, Field

from specdoctor.errors import NoData, SpecdoctorError, ToolFailed, ToolRetry, Unresolved
from specdoctor.host.base import Raw
from specdoctor.models.phases import PhaseEffect, PhaseTimes
from specdoctor.stats.history_search import HistorySearch, Probe, SideJudge, launch_bound, search_history
from specdoctor.stats.summary import diff_of_medians_ci
from specdoctor.toolkit import ToolContext, registry, tool
from specdoctor.tools.checkout.bisect import arms_phase_effect
from specdoctor.tools.checkout.commits import CommitCatalog, CommitRow, CommitsInput, catalog_commits
from specdoctor.tools.checkout.manifest import decode_name
from specdoctor.tools.checkout.trial_code import WrongTree, check_origin, in_tree, source_names
from specdoctor.tools.checkout.trial_tree import TrialSource, TrialTree, prepare_source, remove_tree
from specdoctor.tools.serving.arm_profiles import ArmProfiles, placed_probe, profiled_how
from specdoctor.tools.serving.plan import PlannedPhase
from specdoctor.tools.serving.trial import LaunchConfig, LaunchFailed, MeasureFailed, profile, profiled, trial
from specdoctor.tools.serving.trial import measure as measure_

__all__ = ["commit_bisect_phase", "CommitBisectInput", "CommitTrial", "CulpritCommit", "SkippedCommit", "CommitBisectResult",
           "bisect_commits", "commit_tree"]

_IDS = itertools.count(1)
_NO_LOCKS = {"GIT_OPTIONAL_LOCKS": "0"}


class CommitBisectInput(CommitsInput):
    """Arguments of bisect_commits (the range is catalog_commits')."""

    launch: str = Field(description="The speculative server's launch line.")  # type: ignore[assignment]
    python: str | None = None
    essential: list[str] = Field(default_factory=list, description="Local patches carried onto every commit tried.")
    env: dict[str, str] = Field(default_factory=dict, description="Env for trial servers (e.g. the running server's).")
    trial_port: int | None = Field(default=None, description="Port for trial servers (default: the launch line's).")
    runs: int = Field(default=5, ge=3, description="Benchmark runs per look.")
    max_runs: int = Field(default=20, ge=3, description="Runs per trial before it is undecided.")
    requests_per_run: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=128, ge=2)
    magnitude_pct: float = Field(default=3.0, gt=0, description="Smallest HEAD-vs-good slowdown worth a search (%).")
    phases: bool = Field(default=True, description="Profile the culprit and its parent for the phase (on each probe's "
                         "server while up; a launch only for one no probe profiled).")


class CommitTrial(BaseModel):
    """One launch at a commit: what it held, what came out."""

    index: int
    sha: str
    subject: str
    purpose: str
    outcome: str = Field(description="slow / fast / measured / skip / unresolved")
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    cause: str | None = None


class CulpritCommit(BaseModel):
    """A first bad commit, confirmed both ways (it slow, its parent fast, the two DIFFERENT)."""

    index: int
    sha: str
    subject: str
    pr: int | None = None
    merge: bool = False
    files: list[str] = Field(default_factory=list)
    hot_files: list[str] = Field(default_factory=list, description="Its files on this server's hot path.")
    parent: str
    effect_tps: float = Field(description="median(C) - median(parent), both with the essentials.")
    ci_low: float
    ci_high: float
    comparison: str
    phase_effect: PhaseEffect | None = None

    def line(self) -> str:
        pr = f" (PR #{self.pr})" if self.pr and f"#{self.pr}" not in self.subject else ""
        eff = f"{self.effect_tps:+.1f} tok/s [{self.ci_low:+.1f}, {self.ci_high:+.1f}]"
        ph = f"; {self.phase_effect.line()}" if self.phase_effect else ""
        return f"commit {self.sha[:10]} '{self.subject}'{pr}: {eff}, files {', '.join(self.files[:4])}{ph}"


class SkippedCommit(BaseModel):
    """A commit that could not be tested (git bisect skip), and why."""

    sha: str
    subject: str
    why: str


class CommitBisectResult(BaseModel):
    """The first bad commit(s) between the good run's commit and HEAD, with every trial and what it cost."""

    verdict: str = Field(description="culprit / no-change / range / unresolved")
    good: str
    head: str
    commits: int
    culprits: list[CulpritCommit] = Field(default_factory=list)
    ranges: list[list[str]] = Field(default_factory=list, description="When skipped commits hide the boundary: the "
                                    "commits the first bad one is among (none named).")
    skipped: list[SkippedCommit] = Field(default_factory=list)
    head_vs_good: str | None = None
    launches: int
    bound: int = Field(description="⌈log2 N⌉ + 2: launches one culprit needs with nothing skipped.")
    trials: list[CommitTrial] = Field(default_factory=list)
    phase_launches: int = 0
    phase_from_trials: int = Field(default=0, description="Culprit or parent commits whose phase profile came from "
                                   "their own probe's server (no launch).")
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        if self.culprits:
            who = "; ".join(c.line() for c in self.culprits)
        elif self.ranges:
            who = "first bad commit among " + "; ".join(", ".join(s[:10] for s in r) for r in self.ranges)
        else:
            who = "no commit named"
        skip = f", {len(self.skipped)} skipped" if self.skipped else ""
        return f"{self.verdict}: {who} ({self.commits} commits, {self.launches} launches, bound {self.bound}{skip})"


def _q(s: str) -> str:
    return shlex.quote(s)


def _essential_patch(ctx: ToolContext, src: TrialSource, paths: list[str]) -> tuple[bytes, list[str]]:
    """The essential files' change against HEAD as one binary patch (tracked files), and their untracked ones."""
    tracked = [p for p in paths if src.status_of(p) not in (None, "?")]
    untracked = [p for p in paths if src.status_of(p) == "?"]
    if not tracked:
        return b"", untracked
    argv = ["git", "--no-optional-locks", "-C", src.top, "diff", "--binary", "--full-index", "--no-renames",
            "--no-color", "--no-ext-diff", "HEAD", "--", *[decode_name(p).decode("utf-8", "surrogateescape")
                                                          for p in tracked]]
    return ctx.host.run(argv, env=_NO_LOCKS).stdout.encode("utf-8", "surrogateescape"), untracked


@contextmanager
def commit_tree(ctx: ToolContext, src: TrialSource, sha: str, patch: bytes, untracked: list[str],
                name: str) -> Iterator[TrialTree]:
    """A tree at `sha` with the essentials re-applied three-way (Unresolved when they conflict); removed after."""
    remove_tree(ctx, name)
    tree = f"{src.root}/{name}"
    gt = f"git -C {_q(tree)}"
    setup = (f"set -e; git init -q {_q(tree)}; printf '%s\\n' {_q(src.objects)} > {_q(tree)}/.git/objects/info/"
             f"alternates; {gt} read-tree {_q(sha)}; {gt} checkout-index -a -f; {gt} update-index -q --refresh; {gt} update-ref --no-deref HEAD "
             f"{_q(sha)}")
    try:
        ctx.host.run(Raw(setup), timeout=900)
        if patch:
            res = ctx.host.run(["git", "-C", tree, "apply", "--3way", "--whitespace=nowarn", "-"], stdin=patch,
                               check="ignore")
            if not res.ok:
                raise Unresolved("the essential local patches do not apply here (three-way): "
                                 + " ".join((res.stderr or res.stdout).split())[:300])
        if untracked:
            ctx.host.run(Raw(f"tar -xpf {_q(src.tar)} -C {_q(tree)} --null --no-recursion -T -"),
                         stdin=b"".join(decode_name(p) + b"\0" for p in untracked), timeout=900)
        pp = f"{tree}/python" if ctx.host.exists(f"{tree}/python/sglang") else tree
        yield TrialTree(name=name, path=tree, head=sha, pythonpath=pp, applied_files=list(untracked))
    finally:
        try:
            remove_tree(ctx, name)
        except SpecdoctorError:
            pass


class _Prober:
    """Runs the search's probes: one launch at a commit's tree, measured while the judge wants more runs."""

    def __init__(self, ctx: ToolContext, args: CommitBisectInput, src: TrialSource, shas: list[str],
                 rows: list[CommitRow], patch: bytes, untracked: list[str], arms: ArmProfiles | None = None):
        self.ctx, self.args, self.src, self.shas, self.rows = ctx, args, src, shas, rows
        self.patch, self.untracked = patch, untracked
        self.profiled = 0
        self.arms = arms or ArmProfiles()

    def _subject(self, i: int) -> str:
        return self.rows[i - 1].subject if i > 0 else "(the good run's commit)"

    def config(self, tree: TrialTree, label: str) -> LaunchConfig:
        a = self.args
        return in_tree(LaunchConfig(command=a.launch, python=a.python, port=a.trial_port, env=a.env, label=label),
                       tree)

    def __call__(self, i: int, purpose: str, judge: SideJudge | None, runs: int) -> Probe:
        a = self.args
        try:
            with commit_tree(self.ctx, self.src, self.shas[i], self.patch, self.untracked,
                             f"commit-{next(_IDS)}") as tree:
                with trial(self.ctx, self.config(tree, f"commit-{i}")) as handle:
                    check_origin(handle, tree)
                    xs: list[float] = []
                    want = runs
                    while True:
                        m = measure_(handle, runs=want - len(xs), requests_per_run=a.requests_per_run,
                                     max_new_tokens=a.max_new_tokens, label=purpose[:40],
                                     warmup_runs=0 if xs else 1)
                        xs += [float(x) for x in m.samples]
                        verdict = judge(xs) if judge else "measured"
                        if verdict is not None or len(xs) >= a.max_runs:  # placed, or a split point: an arm?
                            self.arms.take([str(i)], purpose, handle, requests_per_run=a.requests_per_run,
                                           max_new_tokens=a.max_new_tokens, key=f"phases_commit_{i}",
                                           outcome=verdict or "unresolved")
                        if verdict is not None:
                            return Probe(outcome=verdict, samples=xs)  # type: ignore[arg-type]
                        if len(xs) >= a.max_runs:
                            return Probe(outcome="unresolved", samples=xs,
                                         cause=f"comparator undecided after {len(xs)} runs")
                        want = min(2 * len(xs), a.max_runs)
        except LaunchFailed as exc:
            return Probe(outcome="skip", cause=f"the server does not start: {_last_error(exc.result.summary)}"[:400])
        except WrongTree as exc:
            return Probe(outcome="unresolved", cause=str(exc)[:400])
        except MeasureFailed as exc:
            return Probe(outcome="unresolved", cause=f"benchmark failed: {exc.result.summary}"[:400])
        except Unresolved as exc:  # the essentials conflict at this commit
            return Probe(outcome="skip", cause=str(exc)[:400])

    def profile(self, arm: list[str], label: str) -> tuple[PhaseTimes | None, str]:
        i = int(arm[0])
        try:
            with commit_tree(self.ctx, self.src, self.shas[i], self.patch, self.untracked,
                             f"commit-{next(_IDS)}") as tree:
                self.profiled += 1
                with trial(self.ctx, profiled(self.ctx, self.config(tree, f"phases-{label}"))) as handle:
                    check_origin(handle, tree)
                    return profile(handle, requests_per_run=self.args.requests_per_run,
                                   max_new_tokens=self.args.max_new_tokens)
        except (ToolRetry, Unresolved, WrongTree) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:200]


def commit_bisect_phase(n: int, runs: int) -> PlannedPhase:
    """The plan's row for bisect_commits over n commits: the two ends and ⌈log2 n⌉ probes; the culprit's phase profile
    is taken on the probes' own servers (no launch expected, at most 2 when one could not be profiled there); each
    skipped commit costs one more."""
    return PlannedPhase(step="bisect_commits", launches=launch_bound(n) + 2, runs=runs + 1,
                        expected=float(launch_bound(n)),
                        condition=f"only if HEAD ({n} commits past the good run's) is slower than the good commit "
                                  "with the essentials (else its first 2 launches); the confirmed commit's phase "
                                  "profile against its parent is taken on their probes' own servers (the last 2 only "
                                  "when one could not be profiled there); +1 per skipped commit, and ~log2 more per "
                                  "further slow commit",
                        decides="which upstream commit(s) since the good run cause the change")


def _last_error(text: str) -> str:
    """The traceback's last 'SomethingError: ...' line of a failed start, else the text's last line."""
    errs = re.findall(r"^\s*([A-Za-z_.]*(?:Error|Exception)\b:.*)$", text, re.M)
    return errs[-1].strip() if errs else (text.strip().splitlines() or ["?"])[-1]


def _culprit(p: _Prober, found: HistorySearch, k: int) -> CulpritCommit:
    c = found.culprits[k]
    row = p.rows[c.index - 1]
    lo, hi = diff_of_medians_ci(c.parent_samples, c.samples)
    return CulpritCommit(index=c.index, sha=row.sha, subject=row.subject, pr=row.pr, merge=row.merge,
                         files=[f.path for f in row.files], hot_files=[f.path for f in row.files if f.on_hot_path],
                         parent=p.shas[c.parent],
                         effect_tps=statistics.median(c.samples) - statistics.median(c.parent_samples),
                         ci_low=lo, ci_high=hi, comparison=c.comparison.summary_line())


@tool(effect="disrupt")
def bisect_commits(ctx: ToolContext, args: CommitBisectInput) -> CommitBisectResult:
    """Bisect the upstream commits between the good run's commit and HEAD, carrying the essential local patches.

    Each trial is a tree at commit C plus the essentials (three-way), launched and measured with the sequential
    comparator; a commit where the essentials conflict or the server does not start is skipped and reported.
    The first bad commit is named only when confirmed both ways, with its effect [CI] and the phase it moved.
    The user's checkout is only read.
    """
    cat: CommitCatalog = catalog_commits(ctx, args)
    if not cat.commits:
        raise NoData("HEAD is the good run's commit: no upstream range to bisect")
    ctx = dataclasses.replace(ctx, auto_approve=True)  # this disruptive call was approved as a whole
    src = prepare_source(ctx, args.repo)
    if src.head != cat.head:
        raise ToolFailed(f"HEAD moved while cataloguing ({cat.head[:10]} -> {src.head[:10]})")
    essential = sorted(set(source_names(ctx, args.repo, args.essential))) if args.essential else []
    unknown = [e for e in essential if src.status_of(e) is None]
    if unknown:
        raise ToolRetry(f"not local changes of {args.repo}: {', '.join(unknown[:5])}")
    patch, untracked = _essential_patch(ctx, src, essential)
    shas = [cat.good] + [r.sha for r in cat.commits]
    arms = ArmProfiles(placed_probe if args.phases else None)
    prober = _Prober(ctx, args, src, shas, cat.commits, patch, untracked, arms=arms)
    n = len(cat.commits)
    try:
        found = search_history(n, prober, runs=args.runs, max_runs=args.max_runs, magnitude_pct=args.magnitude_pct)
    finally:
        registry.call(ctx, "stop_server", {"pgid": None})
    res = CommitBisectResult(
        verdict=found.verdict, good=cat.good, head=cat.head, commits=n, launches=found.launches,
        bound=launch_bound(n), notes=list(cat.notes) + list(found.notes),
        head_vs_good=found.head_vs_good.summary_line() if found.head_vs_good else None,
        trials=[CommitTrial(index=t.index, sha=shas[t.index], subject=prober._subject(t.index), purpose=t.purpose,
                            outcome=t.outcome, samples=t.samples,
                            median=statistics.median(t.samples) if t.samples else None, cause=t.cause)
                for t in found.trials],
        skipped=[SkippedCommit(sha=shas[t.index], subject=prober._subject(t.index), why=t.cause or "?")
                 for t in found.trials if t.outcome == "skip"],
        ranges=[[shas[i] for i in range(a + 1, b + 1)] for a, b in found.ranges])
    prof = arms.profiler(prober.profile)
    for k in range(len(found.culprits)):
        cul = _culprit(prober, found, k)
        if args.phases:
            eff, what, _ = arms_phase_effect([str(cul.index)], [str(found.culprits[k].parent)], prof,
                                             f"commit {cul.sha[:10]} vs its parent, both with the essentials",
                                             labels=(f"c{cul.index}", f"p{found.culprits[k].parent}"))
            cul.phase_effect = eff
            res.notes.append(f"phases of {cul.sha[:10]} vs its parent ({profiled_how(arms.used, prober.profiled)}): "
                             f"{what}")
        res.culprits.append(cul)
    res.phase_launches, res.phase_from_trials = prober.profiled, arms.used
    return res
