"""The pure search: launches used and answers for every culprit position, interactions, unresolved trials."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from specdoctor.stats.ddmin import CachedOracle, classify, ddmin, isolate, prefix_search


def _oracle(culprits: set[int], unresolved: set[frozenset[int]] = frozenset()) -> CachedOracle[int]:
    def test(s: frozenset[int]):
        if s in unresolved:
            return "unresolved"
        return "regressed" if culprits and culprits <= s else "same"
    return CachedOracle(test)


@pytest.mark.parametrize("p", [4, 8, 16, 32])
def test_single_culprit_any_position_within_log2_plus_3(p):
    # references (2) + bisection (log2) + the confirmation both ways (the one not already measured)
    for c in range(p):
        res = isolate(list(range(p)), _oracle({c}))
        assert res.verdict == "culprit" and res.culprits == [str(c)] and res.confirmed
        assert res.tests <= math.ceil(math.log2(p)) + 3, (c, res.trials)
        subsets = {frozenset(t.subset) for t in res.trials}
        assert frozenset({str(c)}) in subsets  # the culprit alone was measured slow
        assert frozenset(str(i) for i in range(p) if i != c) in subsets  # everything but it, measured fast


def test_seeded_references_cost_nothing():
    oracle = _oracle({5})
    oracle.seed(frozenset(range(8)), "regressed")
    oracle.seed(frozenset(), "same")
    res = isolate(list(range(8)), oracle)
    assert res.culprits == ["5"] and res.tests <= 5


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(range(8), 2)))
def test_two_interacting_culprits_found(a, b):
    res = isolate(list(range(8)), _oracle({a, b}))
    assert sorted(int(c) for c in res.culprits) == [a, b] and res.confirmed
    assert res.verdict == "interaction"
    assert res.tests < 8 * 7 // 2  # far fewer than trying pairs


def test_no_regression_and_not_in_patches():
    assert isolate(list(range(8)), _oracle(set())).verdict == "no-regression"

    def always_slow(_s):
        return "regressed"
    res = isolate(list(range(8)), CachedOracle(always_slow))
    assert res.verdict == "not-in-patches" and res.culprits == []
    assert res.trials[-1].subset == []  # the essentials-only reference was measured last


def test_unresolved_half_is_never_counted_good_or_bad():
    half = frozenset(range(4))
    res = isolate(list(range(8)), _oracle({6}, unresolved={half}))
    assert res.culprits == ["6"]
    assert any(t.outcome == "unresolved" for t in res.trials)


def test_both_halves_unresolved_search_goes_on_and_confirms_both_ways():
    res = isolate(list(range(8)), _oracle({6}, unresolved={frozenset(range(4)), frozenset(range(4, 8))}))
    assert res.culprits == ["6"] and res.confirmed
    outcomes = {frozenset(t.subset): t.outcome for t in res.trials}
    assert outcomes[frozenset({"6"})] == "regressed"
    assert outcomes[frozenset(str(i) for i in range(8) if i != 6)] == "same"


def test_everything_unresolved_names_nothing():
    items = list(range(4))
    flaky = {frozenset(s) for n in range(1, 4) for s in itertools.combinations(items, n)}
    res = isolate(items, _oracle({2}, unresolved=flaky))
    assert res.verdict == "unresolved" and res.culprits == [] and "2" in res.candidates


def test_unresolved_single_file_never_becomes_the_culprit():
    # the field case: two patches slow only together; one of them alone comes back unresolved, the other half
    # fast — the old search concluded the unresolved file was the culprit ("inferred among them")
    res = isolate([0, 1], _oracle({0, 1}, unresolved={frozenset({0})}))
    assert res.culprits == [] and res.verdict == "unresolved" and not res.confirmed
    assert sorted(res.candidates) == ["0", "1"]


def test_the_same_trials_resolved_name_both_interacting_patches():
    # must-fire counterpart of the test above: nothing unresolved → both named, confirmed both ways
    res = isolate([0, 1], _oracle({0, 1}))
    assert res.verdict == "interaction" and sorted(res.culprits) == ["0", "1"] and res.confirmed
    outcomes = {frozenset(t.subset): t.outcome for t in res.trials}
    assert outcomes[frozenset({"0", "1"})] == "regressed" and outcomes[frozenset()] == "same"
    assert outcomes[frozenset({"0"})] == "same" and outcomes[frozenset({"1"})] == "same"


@pytest.mark.parametrize("seed", range(40))
def test_a_named_culprit_set_is_always_the_true_one(seed):
    # random truths (one culprit or an interacting pair) and random unresolved trials: whatever the search
    # concludes, it never names a set that is not the truth
    rng = random.Random(seed)
    items = list(range(rng.choice([2, 3, 5, 8])))
    truth = set(rng.sample(items, rng.choice([1, 2]) if len(items) > 1 else 1))
    flaky = {frozenset(s) for s in (rng.sample(items, rng.randint(0, len(items))) for _ in range(4))} - {
        frozenset(items), frozenset()}
    res = isolate(items, _oracle(truth, unresolved=flaky))
    if res.culprits:
        assert sorted(res.culprits) == sorted(str(c) for c in truth), (truth, flaky, res.trials)
        assert res.confirmed
    else:
        assert res.verdict == "unresolved" and res.candidates


def test_ddmin_and_prefix_search_find_minimal_start_sets():
    need = {1, 6}

    def starts(s):
        return "regressed" if need <= set(s) else "same"
    assert sorted(ddmin(list(range(8)), starts)) == [1, 6]
    assert sorted(prefix_search(list(range(8)), CachedOracle(lambda s: starts(s)))) == [1, 6]


def test_classify_uses_both_references():
    rng = random.Random(1)
    slow = [rng.gauss(60, 1) for _ in range(5)]
    fast = [rng.gauss(82, 1) for _ in range(5)]
    assert classify([rng.gauss(82, 1) for _ in range(5)], slow, fast) == "same"
    assert classify([rng.gauss(60, 1) for _ in range(5)], slow, fast) == "regressed"
    assert classify([rng.gauss(71, 1) for _ in range(5)], slow, fast) == "regressed"  # partial slowdown
    assert classify([60.0, 90.0], slow, None) is None  # too few runs: undecided


def test_one_patch_spanning_the_references_is_measured_again_before_it_is_named():
    """With one non-essential patch, 'it alone' and 'every other patch' ARE the subtraction's two references: a
    false DIFFERENT there would confirm itself. With replicate=True the patch is measured again in a fresh trial;
    named only when that trial is slow too, never when it is fast or undecided."""
    for fresh, named in (("regressed", ["p"]), ("same", []), ("unresolved", [])):
        calls: list[frozenset[str]] = []

        def test(subset: frozenset[str], fresh: str = fresh, calls: list[frozenset[str]] = calls) -> str:
            calls.append(subset)
            return fresh

        oracle = CachedOracle(test)
        oracle.seed(frozenset(["p"]), "regressed")
        oracle.seed(frozenset(), "same")
        res = isolate(["p"], oracle, replicate=True)
        assert res.culprits == named and res.confirmed == bool(named), (fresh, res)
        assert calls[0] == frozenset(["p"])  # the fresh trial is the patch alone
    legacy = CachedOracle(lambda s: "unresolved")
    legacy.seed(frozenset(["p"]), "regressed")
    legacy.seed(frozenset(), "same")
    assert isolate(["p"], legacy).culprits == ["p"] and legacy.calls == 0  # without replicate: the old shortcut


def test_measured_confirmations_need_no_replication():
    """Two patches, one slow: its confirming trials are real trials (not the references), so nothing is re-run."""
    oracle = CachedOracle(lambda s: "regressed" if "b" in s else "same")
    oracle.seed(frozenset(["a", "b"]), "regressed")
    oracle.seed(frozenset(), "same")
    res = isolate(["a", "b"], oracle, replicate=True)
    assert res.culprits == ["b"] and res.confirmed
    assert not any("fresh trial" in t.purpose for t in res.trials)
