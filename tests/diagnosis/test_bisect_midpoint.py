"""The bisection judges each trial by which reference it is like, buys runs while undecided, and never infers a
culprit from an unresolved trial (a fake box: each `run` is one launch whose runs are drawn around a set mean)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from specdoctor.stats.nearer import midpoint_looks, side_of_midpoint
from specdoctor.tools.checkout.bisect import BisectInput, Trial, search_patches, sequential_trial

SLOW, FAST = 45.0, 50.0
A, B, C, D = "models/a.py", "layers/b.py", "managers/c.py", "utils/d.py"


def _box(mean: Callable[[frozenset[str]], float], cv: float, seed: int):
    """`run` for search_patches: one launch per call, runs drawn log-normally around `mean(patches)`."""
    rng = random.Random(seed)
    launches: list[Trial] = []

    def run(subset, purpose, measure, judge):
        rec = Trial(patches=list(subset), outcome="unresolved", purpose=purpose)
        launches.append(rec)
        mu = mean(frozenset(subset))
        sequential_trial(rec, lambda n: [mu * rng.lognormvariate(0, cv) for _ in range(n)],
                         midpoint_looks(measure["runs"], measure["max_runs"]), judge)
        return rec

    def draw(subset: frozenset[str], n: int) -> list[float]:
        return [mean(subset) * rng.lognormvariate(0, cv) for _ in range(n)]

    return run, launches, draw


def _args(draw, items: list[str], n: int = 5) -> BisectInput:
    return BisectInput(repo="/r", launch="python -m sglang.launch_server", runs=5, max_runs=30,
                       reference_slow=draw(frozenset(items), n), reference_fast=draw(frozenset(), n))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_trial_that_stays_undecided_never_yields_a_culprit(seed):
    # A and B each carry half of the slowdown: a trial with one of them sits on the midpoint between the
    # references, so the comparator cannot place it however many runs it buys; the old search inferred the
    # other half's patch from such a trial. Here no patch may be named.
    def mean(s: frozenset[str]) -> float:
        return SLOW + (FAST - SLOW) * (0.5 * (A not in s) + 0.5 * (B not in s))

    run, launches, draw = _box(mean, 0.01, seed)
    items = [A, B, C]
    found = search_patches(items, run, _args(draw, items))
    assert found.culprits == [] and not found.confirmed
    assert found.verdict == "unresolved"
    undecided = [t for t in launches if t.outcome == "unresolved"]
    assert undecided and all(len(t.samples) == 30 for t in undecided)  # it bought runs up to the cap first
    assert all("undecided" in (t.cause or "") for t in undecided)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_interacting_patches_are_both_named_and_confirmed_both_ways(seed):
    # A and B slow verify only together; C and D are innocent
    def mean(s: frozenset[str]) -> float:
        return SLOW if {A, B} <= s else FAST

    run, launches, draw = _box(mean, 0.03, seed)
    items = [A, C, B, D]
    found = search_patches(items, run, _args(draw, items))
    assert found.verdict == "interaction" and found.confirmed
    assert sorted(found.culprits) == sorted([A, B])
    by_subset = {frozenset(t.patches): t.outcome for t in launches}
    assert by_subset[frozenset({A, B})] == "regressed"  # the pair alone reproduces the slowdown
    assert by_subset[frozenset({C, D})] == "same"  # every patch but the pair restores it
    assert by_subset[frozenset({A})] == "same" and by_subset[frozenset({B})] == "same"  # each member is needed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_references_too_noisy_for_their_gap_are_measured_again(seed):
    # a 10 % gap with 4 % run-to-run noise: three runs per reference (as measured) cannot place a trial at any cap
    slow, fast = 45.0, 49.5

    def mean(s: frozenset[str]) -> float:
        return slow if A in s else fast

    run, launches, draw = _box(mean, 0.04, seed)
    items = [A, B, C]
    args = _args(draw, items).model_copy(update={"reference_slow": [43.0, 47.0, 45.0],
                                                 "reference_fast": [47.5, 51.5, 49.5]})
    found = search_patches(items, run, args)
    again = [t for t in launches if t.purpose.startswith("reference again")]
    # both references once each: before the first trial, or when a trial stayed undecided because of them
    assert [t.patches for t in again] == [items, []] and all(len(t.samples) == 27 for t in again)
    assert found.culprits == [A] and found.confirmed


def test_a_clear_gap_measures_no_reference_again():
    # must not fire: a 25 % gap over 2 % noise is placed with the five runs the subtraction measured
    def mean(s: frozenset[str]) -> float:
        return 40.0 if A in s else 50.0

    run, launches, draw = _box(mean, 0.02, 4)
    items = [A, B, C]
    found = search_patches(items, run, _args(draw, items))
    assert not [t for t in launches if t.purpose.startswith("reference again")]
    assert found.culprits == [A] and all(len(t.samples) == 5 for t in launches)


def test_side_of_midpoint_places_a_trial_and_refuses_without_a_gap():
    rng = random.Random(0)
    slow = [SLOW * rng.lognormvariate(0, 0.02) for _ in range(10)]
    fast = [FAST * rng.lognormvariate(0, 0.02) for _ in range(10)]
    like_fast = [FAST * rng.lognormvariate(0, 0.02) for _ in range(10)]
    assert side_of_midpoint(like_fast, slow, fast, level=0.01).outcome == "fast"
    assert side_of_midpoint(slow[:5], slow, fast, level=0.01).outcome == "slow"
    # references the wrong way round (no gap to split): never a side
    assert side_of_midpoint(like_fast, fast, slow, level=0.01).outcome is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_references_measured_again_reach_the_effect_search(seed):
    # A and B each cost half the gap (the slow/fast search leaves them undecided and measures both references
    # again); the fast reference it was handed came from a launch that read 1 % high. The effect search must read
    # its effects against every run of each reference, not against that one launch's five.
    from specdoctor.tools.checkout.bisect_effects import culprit_effects, effects_search

    def mean(s: frozenset[str]) -> float:
        return SLOW + (FAST - SLOW) * (0.5 * (A not in s) + 0.5 * (B not in s))

    run, launches, draw = _box(mean, 0.01, seed)
    items = [A, B, C, D]
    args = _args(draw, items)
    args.reference_fast = [x * 1.01 for x in args.reference_fast]  # that launch's offset
    refs = {"slow": list(args.reference_slow or []), "fast": list(args.reference_fast or [])}
    found = search_patches(items, run, args, refs)
    assert not found.confirmed
    assert len(refs["fast"]) > 5 and len(refs["slow"]) > 5  # measured again, in place
    again = [t for t in launches if t.purpose.startswith("reference again")]
    assert sorted(refs["fast"][5:]) == sorted(next(t.samples for t in again if not t.patches))
    res, search, _notes = effects_search(items, run, slow=refs["slow"], fast=refs["fast"], runs=5, max_runs=30,
                                         measure={"requests_per_run": 3, "max_new_tokens": 128})
    named = {c.path for c in culprit_effects(search)} if res is not None and search is not None else set()
    assert named == {A, B}, (named, _notes)
