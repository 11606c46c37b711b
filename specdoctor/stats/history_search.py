"""The first bad commit(s) of a first-parent range, as a pure function of a probe (one call = one launch).

`git bisect` finds the first bad commit but knows nothing of noise; Pinpoint bisects statistically and reports the
culprit with its effect size. This search does both over commits 0..n (0: the good run's commit, n: HEAD): the
two ends are measured, HEAD is compared with the good commit (comparator: DIFFERENT and slower, else no commit is
named), then each probe is placed against the segment's two ends by the midpoint test (stats.nearer), with more
runs while undecided. A commit that cannot be tested (the essential local patches do not apply, the server does
not start) is skipped the way `git bisect skip` does: the next commit nearest the middle is tried instead, and a
boundary hidden behind skipped commits is reported as a range, never as a culprit. A culprit is named only when
confirmed both ways: it was placed slow, its parent fast, and its parent's runs against its own are DIFFERENT
(slower). When the ends of the remaining segments still differ (a second culprit), each is searched the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.stats.comparator import Comparison, compare
from specdoctor.stats.nearer import level_at, midpoint_looks, side_of_midpoint

__all__ = ["Probe", "ProbeFn", "SideJudge", "HistoryTrial", "Culprit", "HistorySearch", "search_history",
           "launch_bound"]

SideJudge = Callable[[list[float]], "str | None"]
"""Given a probe's runs so far: 'slow', 'fast' (or for a reference 'measured'), or None for more runs."""


class Probe(BaseModel):
    """What one launch at a commit gave: its runs, or why it could not be judged."""

    outcome: Literal["slow", "fast", "measured", "skip", "unresolved"]
    samples: list[float] = Field(default_factory=list)
    cause: str | None = None


ProbeFn = Callable[[int, str, "SideJudge | None", int], Probe]
"""probe(index, purpose, judge, runs): launch the commit's tree (essentials carried), measure `runs` first and more
while `judge` returns None (up to the cap), stop."""


class HistoryTrial(BaseModel):
    """One launch of the search: which commit, why, what came out."""

    index: int
    purpose: str
    outcome: str
    samples: list[float] = Field(default_factory=list)
    cause: str | None = None


class Culprit(BaseModel):
    """A first bad commit confirmed both ways: its parent's runs against its own."""

    index: int
    parent: int = Field(description="The last good commit measured before it (index - 1 when it is confirmed).")
    comparison: Comparison
    samples: list[float] = Field(default_factory=list, description="Its runs (with the essentials).")
    parent_samples: list[float] = Field(default_factory=list, description="Its parent's runs.")


class HistorySearch(BaseModel):
    """What the search concluded over commits 0..n and what it cost."""

    verdict: Literal["culprit", "no-change", "range", "unresolved"]
    culprits: list[Culprit] = Field(default_factory=list)
    ranges: list[tuple[int, int]] = Field(default_factory=list, description="(lo, hi]: the first bad commit is one "
                                          "of lo+1..hi but skipped commits or an undecided probe hide which.")
    skipped: list[int] = Field(default_factory=list)
    head_vs_good: Comparison | None = None
    trials: list[HistoryTrial] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def launches(self) -> int:
        return len(self.trials)


def launch_bound(n: int) -> int:
    """Launches one culprit among n commits needs at most when no commit is skipped: the two ends, then
    ⌈log2 n⌉ probes (the last good and first bad commits are both measured: the confirmation costs nothing more)."""
    return 2 + (math.ceil(math.log2(n)) if n > 1 else 0)


def search_history(n: int, probe: ProbeFn, *, runs: int = 5, max_runs: int = 20, magnitude_pct: float = 3.0,
                   max_culprits: int = 3) -> HistorySearch:
    """Find the first bad commit(s) among 1..n (0: good, n: HEAD); see the module doc."""
    if n < 1:
        raise ValueError("a range needs at least one commit after the good one")
    out = HistorySearch(verdict="unresolved")
    samples: dict[int, list[float]] = {}
    skipped: set[int] = set()
    looks = midpoint_looks(runs, max_runs)

    def run(i: int, purpose: str, judge: SideJudge | None, first: int = runs) -> Probe:
        p = probe(i, purpose, judge, first)
        out.trials.append(HistoryTrial(index=i, purpose=purpose, outcome=p.outcome, samples=p.samples, cause=p.cause))
        if p.outcome == "skip":
            skipped.add(i)
            out.skipped = sorted(skipped)
        elif p.samples and p.outcome != "unresolved":
            samples[i] = list(p.samples)
        return p

    ref_runs = max(runs, min(2 * runs, max_runs))  # the references place every probe: more runs, no more launches
    good = run(0, "good commit (reference)", None, ref_runs)
    if good.outcome != "measured":
        out.notes.append(f"the good commit could not be measured: {good.cause}")
        return out

    def head_judge(xs: list[float]) -> str | None:
        c = compare(samples[0], xs, magnitude=magnitude_pct / 100 * _median(samples[0]),
                    t_level=level_at(len(xs), looks))
        return "measured" if c.outcome != "UNKNOWN" else None

    head = run(n, "HEAD (reference)", head_judge, ref_runs)
    if head.outcome not in ("measured",) and not head.samples:
        out.notes.append(f"HEAD could not be measured: {head.cause}")
        return out
    samples[n] = list(head.samples)
    hv = compare(samples[0], samples[n], magnitude=magnitude_pct / 100 * _median(samples[0]), unit="tok/s",
                 t_level=level_at(len(samples[n]), looks))
    out.head_vs_good = hv
    if not _slower(hv) or hv.pct_change > -magnitude_pct:  # a slowdown smaller than asked for starts no search
        out.verdict = "no-change"
        out.notes.append(f"HEAD with the essentials vs the good commit: {hv.summary_line()}: no commit is named")
        return out

    pending = [(0, n)]
    while pending and len(out.culprits) < max_culprits:
        lo, hi = pending.pop(0)
        found = _segment(lo, hi, samples, skipped, run, looks, magnitude_pct)
        if found is None:
            continue
        kind, a, b = found
        if kind == "split":  # a probe between both ends, unlike either: a slow commit on each side of it
            pending += [(lo, a), (a, hi)]
            out.notes.append(f"commit {a} sits between both ends of ({lo}, {hi}] (slower than {lo}, faster than "
                             f"{hi}): both sides searched")
            continue
        if kind == "range":
            out.ranges.append((a, b))
            out.notes.append(f"the first bad commit between {lo} and {hi} is one of {a + 1}..{b}: "
                             + ("skipped commits hide which" if all(i in skipped for i in range(a + 1, b))
                                else "a probe stayed undecided"))
            continue
        c = _cmp(samples[a], samples[b], magnitude_pct)
        if not _slower(c):
            out.ranges.append((a, b))
            out.notes.append(f"commit {b} placed slow and {a} fast, but {a} vs {b} directly: {c.summary_line()}: "
                             "not confirmed, not named")
            continue
        out.culprits.append(Culprit(index=b, parent=a, comparison=c, samples=samples[b], parent_samples=samples[a]))
        for x, y in ((lo, a), (b, hi)):  # a second culprit: the ends of what is left still differ
            if y - x >= 1 and x in samples and y in samples and _slower(_cmp(samples[x], samples[y], magnitude_pct)):
                pending.append((x, y))
    out.culprits.sort(key=lambda c: c.index)
    out.verdict = "culprit" if out.culprits else ("range" if out.ranges else "unresolved")
    return out


def _segment(lo: int, hi: int, samples: dict[int, list[float]], skipped: set[int],
             run: Callable[..., Probe], looks: list[int], magnitude_pct: float) -> tuple[str, int, int] | None:
    """Binary search in (lo, hi] with the segment's ends as the references: ('culprit', parent, first bad),
    ('range', lo, hi) when skipped or undecided commits hide the boundary, or ('split', m, hi) when an undecided
    probe m is slower than the fast end and faster than the slow end (a partial effect on each side: Pinpoint
    searches both)."""
    slow, fast = samples[hi], samples[lo]

    def judge(xs: list[float]) -> str | None:
        if len(xs) < 2:
            return None
        return side_of_midpoint(xs, slow, fast, level=level_at(len(xs), looks)).outcome

    a, b = lo, hi
    while b - a > 1:
        m = _pick(a, b, skipped)
        if m is None:
            return ("range", a, b)
        p = run(m, f"commit {m} of ({lo}, {hi}]", judge)
        if p.outcome == "skip":
            continue
        if p.outcome == "slow":
            b = m
        elif p.outcome == "fast":
            a = m
        elif len(p.samples) >= 3 and _slower(_cmp(fast, p.samples, magnitude_pct)) and \
                _slower(_cmp(p.samples, slow, magnitude_pct)):
            samples[m] = list(p.samples)
            return ("split", m, hi)
        else:
            return ("range", a, b)
    return ("culprit", a, b)


def _pick(a: int, b: int, skipped: set[int]) -> int | None:
    """The untested commit nearest the middle of (a, b) that is not skipped (git bisect skip's choice)."""
    mid = (a + b) // 2
    for d in range(0, b - a):
        for m in (mid - d, mid + d):
            if a < m < b and m not in skipped:
                return m
    return None


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2


def _cmp(a: list[float], b: list[float], magnitude_pct: float) -> Comparison:
    return compare(a, b, magnitude=magnitude_pct / 100 * _median(a), unit="tok/s")


def _slower(c: Comparison) -> bool:
    return c.outcome == "DIFFERENT" and c.verdict == "worse"
