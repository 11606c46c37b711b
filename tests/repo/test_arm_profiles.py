"""Phase profiles from the confirming trials themselves (#46): a confirmed culprit's phase costs no extra launch."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from specdoctor.engine.actions.attribute_phases import profiled_arms
from specdoctor.tools.checkout.bisect import BisectInput, confirmed_phase_effect, search_patches
from specdoctor.tools.serving.arm_profiles import ArmProfiles, confirming_arm, placed_probe
from tests.diagnosis.test_phase_effect import _times

ITEMS = [f"p{i}.py" for i in range(7)] + ["verify.py"]  # the culprit last: the halving reaches it at the end


def _box(arms: ArmProfiles, slow: Any = lambda s: "verify.py" in s, seed: int = 5):
    """A fake trial runner: tok/s 100, 80 where `slow(subset)`; each trial's server offers its phase times (verify
    48.8 ms when slow, 42.8 otherwise) to `arms` before it stops, as the real runner does."""
    rng = random.Random(seed)
    trials: list[list[str]] = []

    def tps(subset: list[str]) -> float:
        return (80.0 if slow(subset) else 100.0) + rng.gauss(0, 0.5)

    def run(subset: list[str], purpose: str, measure: dict[str, Any] | None, judge: Any) -> Any:
        trials.append(list(subset))
        rec = SimpleNamespace(patches=list(subset), samples=[], outcome="unresolved", cause=None)
        assert measure is not None
        n = measure["runs"]
        while True:
            rec.samples += [tps(subset) for _ in range(n - len(rec.samples))]
            verdict = judge(rec.samples) if judge is not None else "regressed"
            if verdict is not None or n >= measure["max_runs"]:
                rec.outcome = verdict or "unresolved"
                break
            n = min(2 * n, measure["max_runs"])
        arms.take(subset, purpose, subset, requests_per_run=3, max_new_tokens=64,  # type: ignore[arg-type]
                  outcome=rec.outcome)
        return rec

    return run, tps, trials


def _read(profiled: list[list[str]], slow: Any = lambda s: "verify.py" in s):
    def read(handle: Any, **_: Any):
        profiled.append(list(handle))
        return _times(1.1, 48.8 if slow(handle) else 42.8, seed=len(profiled)), ""
    return read


def test_a_confirmed_culprit_s_phase_is_read_from_its_confirming_trials_with_no_extra_launch():
    profiled: list[list[str]] = []
    arms = ArmProfiles(confirming_arm(ITEMS), read=_read(profiled))
    run, tps, trials = _box(arms)
    args = BisectInput(repo="r", launch="l", reference_slow=[tps(ITEMS) for _ in range(8)],
                       reference_fast=[tps([]) for _ in range(8)])
    found = search_patches(ITEMS, run, args)
    assert found.confirmed and found.culprits == ["verify.py"]
    launched: list[list[str]] = []

    def launch(arm: list[str], label: str):
        launched.append(arm)
        return None, "launched"

    eff, notes = confirmed_phase_effect(found.culprits, ITEMS, arms.profiler(launch))
    assert launched == [] and arms.used == 2, notes  # both arms from their own trials: 0 launches
    assert eff is not None and eff.phase == "verify" and 5 < eff.delta_ms < 7
    # not every trial: the fast halving trials of several patches (but all but one) were not profiled
    assert len(profiled) < len(trials) and all(len(p) <= 1 or len(p) >= len(ITEMS) - 1 for p in profiled)


@pytest.mark.parametrize("two", [("p1.py", "p5.py"), ("p0.py", "p1.py")])  # found by the prefix search; a slow half
def test_an_interacting_pair_s_phase_comes_from_its_trials_too(two):
    def pair(s: list[str]) -> bool:
        return set(two) <= set(s)

    arms = ArmProfiles(confirming_arm(ITEMS), read=_read([], pair))
    run, tps, _ = _box(arms, pair)
    args = BisectInput(repo="r", launch="l", reference_slow=[tps(ITEMS) for _ in range(8)],
                       reference_fast=[tps([]) for _ in range(8)])
    found = search_patches(ITEMS, run, args)
    assert found.confirmed and sorted(found.culprits) == list(two), found.notes
    launched: list[list[str]] = []
    eff, notes = confirmed_phase_effect(found.culprits, ITEMS, arms.profiler(lambda a, label: (launched.append(a),
                                                                                              (None, "x"))[1]))
    assert launched == [] and eff is not None and eff.phase == "verify", notes


def test_an_arm_no_trial_profiled_is_launched_as_before_and_only_that_one():
    profiled: list[list[str]] = []
    arms = ArmProfiles(confirming_arm(ITEMS), read=lambda h, **_: (None, "no profiler on this server"))
    run, tps, _ = _box(arms)
    args = BisectInput(repo="r", launch="l", reference_slow=[tps(ITEMS) for _ in range(8)],
                       reference_fast=[tps([]) for _ in range(8)])
    found = search_patches(ITEMS, run, args)
    read = _read(profiled)
    eff, _ = confirmed_phase_effect(found.culprits, ITEMS, arms.profiler(lambda arm, label: read(arm)))
    assert arms.used == 0 and len(profiled) == 2 and eff is not None and eff.phase == "verify"


def test_nothing_is_profiled_when_phases_are_not_wanted():
    profiled: list[list[str]] = []
    arms = ArmProfiles(None, read=_read(profiled))
    arms.take(["verify.py"], "confirm", ["verify.py"], requests_per_run=3, max_new_tokens=64)  # type: ignore[arg-type]
    assert profiled == [] and arms.taken == 0


def test_the_rule_profiles_possible_arms_only():
    wanted = confirming_arm(ITEMS)
    assert wanted(frozenset(), "", "same") and wanted(frozenset({"p1.py"}), "", "same")
    assert wanted(frozenset(ITEMS[1:]), "", "same")
    assert not wanted(frozenset(ITEMS[:4]), "4 of 8 patches", "same")  # a fast halving trial: never an arm
    assert wanted(frozenset(ITEMS[:4]), "4 of 8 patches", "regressed")  # a slow half: the candidates may end there
    assert wanted(frozenset(ITEMS[:4]), "4 of 8 patches (to confirm)", "same")  # a set of several, when confirmed
    assert wanted(frozenset(ITEMS[:2]), "2 of 8 patches (a candidate set alone)", "same")  # an interaction's set
    assert placed_probe(frozenset({"3"}), "commit 3 of (0, 8]", "slow")
    assert placed_probe(frozenset({"4"}), "commit 4 of (0, 12]", "unresolved")  # undecided: it may split the search
    assert not placed_probe(frozenset({"5"}), "commit 5", "skip")


def test_the_attribution_takes_the_other_confirming_comparison_when_only_its_arms_were_profiled():
    arms = ArmProfiles(confirming_arm(["A", "B", "C"]), read=lambda h, **_: (_times(1.1, 42.8, seed=1), ""))
    for kept in (["A"], []):  # the cause alone, everything reverted: both trials ran and were profiled
        arms.take(kept, "", kept, requests_per_run=3, max_new_tokens=64)  # type: ignore[arg-type]
    assert profiled_arms(arms, ["A", "B", "C"], ["B", "C"], ["A"]) == (["A"], [])
    arms.take(["B", "C"], "", ["B", "C"], requests_per_run=3, max_new_tokens=64)  # type: ignore[arg-type]
    arms.take(["A", "B", "C"], "", ["A", "B", "C"], requests_per_run=3, max_new_tokens=64)  # type: ignore[arg-type]
    assert profiled_arms(arms, ["A", "B", "C"], ["B", "C"], ["A"]) == (["A", "B", "C"], ["B", "C"])
    # must not fire: a cause whose alone-arm no trial profiled keeps today's arms (launched as before)
    assert profiled_arms(ArmProfiles(), ["A", "B"], ["B"], ["A"]) == (["A", "B"], ["B"])


def test_an_arm_profiled_before_the_search_costs_no_launch_and_only_that_arm():
    """The reproduce step's launch of today's configuration is the revert search's "every difference kept" arm:
    seeded, it is read like a trial's own profile; the other arm is still launched (and a seed never overwrites a
    trial's own profile)."""
    arms = ArmProfiles(confirming_arm(["A", "B"]), read=_read([]))
    early = _times(1.1, 48.8, seed=1)
    arms.seed(["A", "B"], early)
    launched: list[list[str]] = []
    prof = arms.profiler(lambda arm, label: (launched.append(arm), (_times(1.1, 42.8, seed=2), ""))[1])
    got, _ = prof(["B", "A"], "today")
    assert got is early and launched == [] and arms.used == 1 and frozenset("AB") in arms.seeded
    prof([], "nothing kept")
    assert launched == [[]]  # must not fire: an arm nobody profiled is launched as before
    taken = _times(1.1, 50.0, seed=3)
    arms.times[frozenset("A")] = taken
    arms.seed(["A"], early)
    assert arms.times[frozenset("A")] is taken and frozenset("A") not in arms.seeded
