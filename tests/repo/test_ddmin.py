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
def test_single_culprit_any_position_within_log2_plus_2(p):
    for c in range(p):
        res = isolate(list(range(p)), _oracle({c}))
        assert res.verdict == "culprit" and res.culprits == [str(c)] and res.confirmed
        assert res.tests <= math.ceil(math.log2(p)) + 2, (c, res.trials)


def test_seeded_references_cost_nothing():
    oracle = _oracle({5})
    oracle.seed(frozenset(range(8)), "regressed")
    oracle.seed(frozenset(), "same")
    res = isolate(list(range(8)), oracle)
    assert res.culprits == ["5"] and res.tests <= 4


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


def test_both_halves_unresolved_stops_with_suspects():
    res = isolate(list(range(8)), _oracle({6}, unresolved={frozenset(range(4)), frozenset(range(4, 8))}))
    assert res.verdict == "unresolved" and len(res.culprits) == 8


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
