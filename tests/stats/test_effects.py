"""The effect-size culprit search: independent culprits with their shares; interactions and noise name nobody."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from specdoctor.stats.effects import search_effects

FAST, NOISE = 82.0, 2.0


def _server(effect: Callable[[frozenset[int]], float], rng: random.Random):
    def draw(sub: frozenset[int], n: int) -> list[float]:
        return [rng.gauss(FAST + effect(sub), NOISE) for _ in range(n)]
    return draw


def _search(p: int, effect: Callable[[frozenset[int]], float], seed: int):
    rng = random.Random(seed)
    draw = _server(effect, rng)
    return search_effects(list(range(p)), lambda sub, _why: draw(sub, 5), slow=draw(frozenset(range(p)), 5),
                          fast=draw(frozenset(), 5), more=draw)


def test_two_independent_culprits_are_found_with_their_shares_in_few_launches():
    beta = {2: -8.0, 13: -14.0}  # one slows the draft, one the verify: additive, ~1/3 and ~2/3 of the gap
    launches = []
    for seed in range(12):
        res = _search(16, lambda s: sum(beta.get(i, 0.0) for i in s), seed)
        assert res.verdict == "culprits" and {c.name for c in res.culprits} == {"2", "13"}, res.notes
        assert res.confirmed_both_ways  # removing them restores, and they alone reproduce the gap: both measured
        for c in res.culprits:
            assert abs(c.share - beta[int(c.name)] / sum(beta.values())) < 0.15
        launches.append(res.launches)
    # a subset holding one of the two is half slow: a measurement, never an undecided comparison
    assert sum(launches) / len(launches) <= 2 * math.ceil(math.log2(16)) + 2


def test_interacting_patches_are_not_named_as_independent_culprits():
    # must not fire: slow only when 3 AND 9 are both applied (no additive effect of either alone)
    for seed in range(8):
        res = _search(16, lambda s: -20.0 if {3, 9} <= s else 0.0, seed)
        assert res.verdict != "culprits" and not res.culprits, (seed, res.verdict, res.notes)


def test_no_gap_no_launch_and_noise_names_nobody():
    res = _search(8, lambda s: 0.0, 1)
    assert res.verdict == "none" and res.launches == 0
    for seed in range(20):  # a one-culprit story: never an innocent beside it
        res = _search(8, lambda s: -20.0 if 5 in s else 0.0, 100 + seed)
        assert {c.name for c in res.culprits} <= {"5"}
