"""Phase profiles of confirming arms, taken on the trial servers already up for them (#46: box time is the cost).

A confirmed culprit's phase comes from the two arms of its confirming comparison, each profiled by the engine's
profiler (PROFILE_RUNS short runs without it and as many with it). A launch costs the user minutes of a production
box (about six on the seeds'), a short run seconds: so a trial whose arm a confirmation may need is profiled right
there, before its server stops, and a phase effect later launches only an arm that no trial profiled (the
behaviour before this module, kept as the fallback). Which trials: the search's own rule (`confirming_arm`,
`placed_probe`), never every trial — the profiled runs cost box time too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from specdoctor.models.phases import PhaseTimes
from specdoctor.tools.serving.trial import TrialHandle, profile

__all__ = ["ArmKey", "ArmProfiler", "ArmRule", "ArmProfiles", "confirming_arm", "placed_probe",
           "profiled_how"]

ArmKey = frozenset[str]
"""An arm: the patches a trial added to the essentials, the deltas it kept at today's value, or a commit index."""
ArmProfiler = Callable[[list[str], str], "tuple[PhaseTimes | None, str]"]
"""`prof(arm, label)`: the arm's phase times, or (None, why)."""
ArmRule = Callable[[ArmKey, str, str], bool]
"""`wanted(arm, purpose, outcome)`: profile this trial (judged `outcome`) while its server is up."""
Reader = Callable[..., "tuple[PhaseTimes | None, str]"]
"""`read(handle, requests_per_run=, max_new_tokens=, key=)`: a trial server's phase times (tools.trial.profile)."""


class ArmProfiles:
    """Phase profiles taken in trials, by arm; `wanted` None means phases are not wanted (nothing is profiled)."""

    def __init__(self, wanted: ArmRule | None = None, read: Reader = profile):
        self.wanted, self.read = wanted, read
        self.times: dict[ArmKey, PhaseTimes] = {}
        self.failed: dict[ArmKey, str] = {}
        self.taken = 0
        """Trials profiled while up (each PROFILE_RUNS short runs twice, no launch)."""
        self.used = 0
        """Arms a phase effect took from a trial's own profile: a launch each that was not made."""
        self.seeded: set[ArmKey] = set()
        """Arms profiled before the search, on an earlier launch of the same configuration (`seed`)."""

    def take(self, arm: Iterable[str], purpose: str, handle: TrialHandle, *, requests_per_run: int,
             max_new_tokens: int, key: str | None = None, outcome: str = "") -> None:
        """Profile the trial server `handle` now when its arm is wanted. A failed profile (an engine that cannot be
        profiled as launched, no trace) is kept as a note and never fails the trial: that arm is launched later,
        as before."""
        k = frozenset(arm)
        if self.wanted is None or k in self.times or not self.wanted(k, purpose, outcome):
            return
        times, why = self.read(handle, requests_per_run=requests_per_run, max_new_tokens=max_new_tokens, key=key)
        self.taken += 1
        if times is not None:
            self.times[k] = times
            self.failed.pop(k, None)
        else:
            self.failed[k] = why

    def seed(self, arm: Iterable[str], times: PhaseTimes) -> None:
        """An arm profiled on a server that ran it before this search (the reproduce step's launch of today's
        configuration): used like a trial's own profile."""
        k = frozenset(arm)
        if k not in self.times:
            self.times[k] = times
            self.seeded.add(k)

    def has(self, arm: Iterable[str]) -> bool:
        return frozenset(arm) in self.times

    def profiler(self, launch: ArmProfiler) -> ArmProfiler:
        """An ArmProfiler that takes an arm's profile from its trial when one was taken, else `launch`es it."""

        def prof(arm: list[str], label: str) -> tuple[PhaseTimes | None, str]:
            got = self.times.get(frozenset(arm))
            if got is not None:
                self.used += 1
                return got, ""
            return launch(arm, label)

        return prof


def profiled_how(from_trials: int, launched: int) -> str:
    """Where the confirming arms' phase profiles came from, for a summary line: their own trials' servers, or
    launches of their own."""
    if from_trials and not launched:
        return "profiled on the confirming trials' own servers, no extra launch"
    if from_trials:
        return f"{from_trials} arm(s) profiled on their trials' own servers, {launched} profiled launch(es)"
    return f"{launched} profiled launches"


def confirming_arm(items: Sequence[str]) -> ArmRule:
    """The rule of a subset search over `items` (patches on the essentials, deltas kept at today's value): profile
    a trial when its subset can be an arm of a confirming comparison — nothing (the fast base), one item (a culprit
    alone), every item but one (all but a culprit), every item (today) — or a trial judged slow ('regressed'), or
    one the search runs to confirm a set or tries a candidate set alone ('confirm' or 'alone' in its purpose). Why
    these: a single culprit's two arms are always of the first shapes, and the bisection reaches a singleton before
    it knows it is the culprit, so the profile is taken then or never; the candidate set it ends with narrows only
    through slow halves, so a set of several culprits is a slow trial, or one tried alone (the interaction search's
    found set) or to confirm (pair-eager-verify's pair was a slow half of 5 patches). Never every trial: each
    profile costs 2 × PROFILE_RUNS short runs, and fast halving trials of several items (but all but one) are no
    arm."""
    n = len(set(items))

    def wanted(arm: ArmKey, purpose: str, outcome: str) -> bool:
        said = purpose.lower()
        return (len(arm) <= 1 or len(arm) >= n - 1 or outcome == "regressed" or "confirm" in said
                or "alone" in said)

    return wanted


def placed_probe(arm: ArmKey, purpose: str, outcome: str) -> bool:
    """The rule of a commit bisection: every probe it measured. Each probe placed slow or fast becomes an end of the
    segment still searched, and one left undecided between both ends splits the search (an end of both halves), so
    any of them can end as the culprit or its parent; a later profile would cost a launch (minutes), this one
    2 × PROFILE_RUNS short runs (seconds) on a server already up. (A probe that could not be measured is skipped.)"""
    return bool(arm) and outcome != "skip"
