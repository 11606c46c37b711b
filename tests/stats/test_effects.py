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


def _launches(effect: Callable[[frozenset[int]], float], rng: random.Random, launch_sd: float):
    """A server whose every launch reads its own offset (sd `launch_sd`), shared by that launch's runs."""
    up = [0.0]

    def launch(sub: frozenset[int], _why: str = "") -> list[float]:
        up[0] = rng.gauss(0.0, launch_sd)
        return more(sub, 5)

    def more(sub: frozenset[int], n: int) -> list[float]:
        return [rng.gauss(FAST + effect(sub) + up[0], NOISE) for _ in range(n)]
    return launch, more


def test_the_fit_reads_the_launches_spread_beyond_their_runs():
    from specdoctor.stats.effects import EffectTrial, _fit, effect_of

    fast = [80.0, 80.4, 79.6, 80.2, 79.8]
    slow = [60.0, 60.4, 59.6, 60.2, 59.8]

    def trial(items: list[str], centre: float) -> EffectTrial:
        smp = [centre + d for d in (0.0, 0.4, -0.4, 0.2, -0.2)]
        return EffectTrial(items=items, purpose="t", samples=smp, effect=effect_of(smp, fast))

    # must not fire: every launch reads what its configuration should, within its runs' spread
    steady, tau2 = _fit(["a"], [trial(["a", "x"], 60.1), trial(["x"], 79.9), trial(["a"], 60.0)], slow, fast)
    assert tau2 == 0.0 and abs(steady["a"].delta + 20.0) < 0.3
    # launches of one configuration 3 tok/s apart where their runs spread 0.3: the fit says so and widens the CI
    apart, tau2 = _fit(["a"], [trial(["a", "x"], 63.0), trial(["x"], 77.0), trial(["a"], 57.5)], slow, fast)
    assert tau2 > 1.0 and apart["a"].se > 3 * steady["a"].se


def _apart_search(beta: dict[int, float], seed: int):
    """The search over 8 patches on a server whose launches read apart as much as its runs spread."""
    launch, more = _launches(lambda s: sum(beta.get(i, 0.0) for i in s), random.Random(seed), NOISE)
    return search_effects(list(range(8)), launch, slow=launch(frozenset(range(8))), fast=launch(frozenset()),
                          more=more)


def test_shares_hold_their_intervals_when_launches_read_apart():
    """Launches of one configuration read a few % apart, as much as runs spread (measured on real SGLang): the shares'
    95 % intervals must still hold the truth about as often as they say, and nobody innocent is named."""
    beta = {2: -9.0, 6: -13.0}
    covered = named = innocent = 0
    for seed in range(30):
        res = _apart_search(beta, 500 + seed)
        if not {c.name for c in res.culprits} <= {"2", "6"}:
            innocent += 1
        elif res.culprits:
            named += 1
            covered += all(c.share_ci[0] <= beta[int(c.name)] / sum(beta.values()) <= c.share_ci[1]
                           for c in res.culprits)
    # Read against the runs' spread alone, the intervals held the truth in 64 % of such searches (29 of 45 over 60
    # seeds); with the launch-to-launch variance the fit reads, 98 % (44 of 45).
    assert named >= 15 and covered >= 0.85 * named, (named, covered)
    # Not yet zero: an innocent's own launch that reads 2 sd low against a fast reference 1 sd high is named
    # (1 search in 30 here). Only a launch of the culprits without it would tell (see benchmarks/diagnosis_cost.py).
    assert innocent <= 1


def test_a_member_the_launches_spread_leaves_short_is_launched_again_not_dropped():
    """Three culprits of a third of the gap each, launches reading apart as much as runs spread: the fit that counts
    that spread can hold one member short of material at 99 % although its own launch read it material. That member is
    launched once more and the fit decides again; before, the search named nobody (the slow/fast search that followed
    found two of three on the twin's three-culprits, or ended inconclusive)."""
    beta = {1: -7.0, 4: -8.0, 6: -7.0}
    again = found_after = innocent = 0
    for seed in range(60):
        res = _apart_search(beta, 900 + seed)
        names = {c.name for c in res.culprits}
        innocent += not names <= {"1", "4", "6"}
        if any("launched again" in t.purpose for t in res.trials):
            again += 1
            assert len([t for t in res.trials if "launched again" in t.purpose]) <= 2  # only the weak members
            found_after += names == {"1", "4", "6"}
    assert again >= 2 and found_after >= 1, (again, found_after)
    assert innocent == 0


def test_a_member_is_seldom_launched_again_where_the_launches_agree():
    """must not fire (as far as chance lets it): without a launch offset the rows' own scatter seldom reads a spread
    beyond the runs' (τ² > 0 by chance), so a marginal member (a fifth of the gap: the threshold) is seldom launched
    twice, and nothing innocent is named either way."""
    beta = {0: -16.0, 3: -4.0}
    again = 0
    for seed in range(30):
        rng = random.Random(700 + seed)

        def draw(sub: frozenset[int], n: int, rng: random.Random = rng) -> list[float]:
            return [rng.gauss(FAST + sum(beta.get(i, 0.0) for i in sub), 0.5) for _ in range(n)]

        res = search_effects(list(range(4)), lambda sub, _why: draw(sub, 5), slow=draw(frozenset(range(4)), 5),
                             fast=draw(frozenset(), 5), more=draw)
        again += any("launched again" in t.purpose for t in res.trials)
        assert {c.name for c in res.culprits} <= {"0", "3"}
    assert again <= 3  # 2 of 30 here; 4 of 30 when the rule ignores whether the launches read apart
