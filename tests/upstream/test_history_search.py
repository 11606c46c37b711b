"""The commit search over a simulated noisy history: right culprits, skips, ranges, the launch bound."""

from __future__ import annotations

import math
import random

import pytest

from specdoctor.stats.history_search import Probe, launch_bound, search_history


def _history(n: int, effects: dict[int, float], *, untestable: frozenset[int] = frozenset(), cv: float = 0.02,
             seed: int = 1, base: float = 60.0):
    """A probe over commits 0..n: commit i runs at base / (1 + sum of effects at <= i), lognormal run noise."""
    rng = random.Random(seed)
    calls: list[int] = []

    def tps(i: int) -> float:
        return base / (1 + sum(e for c, e in effects.items() if c <= i))

    def probe(i, purpose, judge, runs):
        calls.append(i)
        if i in untestable:
            return Probe(outcome="skip", cause="essential patch conflicts")
        xs: list[float] = []
        n = runs
        while True:
            xs += [tps(i) * math.exp(rng.gauss(0, cv)) for _ in range(n - len(xs))]
            verdict = judge(xs) if judge else "measured"
            if verdict is not None or len(xs) >= 20:
                return Probe(outcome=verdict or "unresolved", samples=xs,
                             cause=None if verdict else "comparator undecided")
            n = min(2 * n, 20)

    return probe, calls


@pytest.mark.parametrize("n", [16, 64, 256])
def test_one_culprit_within_the_launch_bound(n: int) -> None:
    for seed in range(3):
        culprit = random.Random(seed + n).randrange(1, n + 1)
        probe, calls = _history(n, {culprit: 0.15}, seed=seed)
        res = search_history(n, probe)
        assert [c.index for c in res.culprits] == [culprit]
        assert res.culprits[0].parent == culprit - 1
        assert res.launches <= launch_bound(n)
        assert len(calls) == res.launches


def test_innocent_history_names_no_commit() -> None:
    for seed in range(5):
        probe, _ = _history(16, {}, seed=seed)
        res = search_history(16, probe)
        assert res.verdict == "no-change" and not res.culprits
        assert res.launches == 2


def test_two_culprits_are_both_found() -> None:
    probe, _ = _history(12, {3: 0.10, 8: 0.20}, seed=4)
    res = search_history(12, probe)
    assert sorted(c.index for c in res.culprits) == [3, 8]


def test_skipped_neighbour_is_stepped_over() -> None:
    probe, calls = _history(16, {9: 0.15}, untestable=frozenset({10, 11, 12}))
    res = search_history(16, probe)
    assert [c.index for c in res.culprits] == [9]
    assert set(res.skipped) <= {10, 11, 12} and res.skipped


def test_untestable_parent_gives_a_range_not_a_culprit() -> None:
    probe, _ = _history(16, {9: 0.15}, untestable=frozenset({8}))
    res = search_history(16, probe)
    assert not res.culprits and res.verdict == "range"
    assert res.ranges == [(7, 9)]


def test_a_probe_between_both_ends_splits_the_search() -> None:
    # the first culprit holds about half the gap: the middle probe sits on the midpoint and cannot be placed, but
    # it is slower than the good end and faster than HEAD: both sides are searched and both culprits named
    hits = 0
    for seed in range(6):
        probe, _ = _history(16, {5: 0.12, 12: 0.12}, seed=seed)
        res = search_history(16, probe)
        assert {c.index for c in res.culprits} <= {5, 12}  # never a wrong commit
        hits += {c.index for c in res.culprits} == {5, 12}
    assert hits >= 5


def test_a_culprit_carries_its_and_its_parents_runs() -> None:
    probe, _ = _history(16, {5: 0.12, 12: 0.12}, seed=1)
    res = search_history(16, probe)
    by = {t.index: t for t in res.trials}
    for c in res.culprits:  # a split probe can be a culprit's parent: its runs travel with the culprit
        assert c.samples and c.parent_samples and c.parent_samples == by[c.parent].samples
