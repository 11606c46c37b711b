"""The bisection's effect search: independent culprits each measured with their share; an interaction falls back."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from specdoctor.tools.checkout.bisect_effects import culprit_effects, effects_search

FAST, NOISE = 100.0, 0.6
MEASURE = {"requests_per_run": 3, "max_new_tokens": 64}


def _box(effects: dict[str, float], pair: tuple[str, str] | None = None, seed: int = 3):
    """A fake trial runner: tok/s = FAST + Σ effects of the applied patches (+ a pair's joint effect), with noise;
    sequential looks as the real runner makes them (the judge asked after each look, up to the cap)."""
    rng = random.Random(seed)
    launches: list[list[str]] = []

    def tps(subset: list[str]) -> float:
        joint = -20.0 if pair and set(pair) <= set(subset) else 0.0
        return FAST + sum(effects.get(p, 0.0) for p in subset) + joint + rng.gauss(0, NOISE)

    def run(subset: list[str], purpose: str, measure: dict[str, Any] | None, judge: Any) -> Any:
        launches.append(list(subset))
        rec = SimpleNamespace(samples=[], outcome="unresolved", cause=None)
        assert measure is not None
        n = measure["runs"]
        while True:
            rec.samples += [tps(subset) for _ in range(n - len(rec.samples))]
            verdict = judge(rec.samples) if judge is not None else "measured"
            if verdict is not None or n >= measure["max_runs"]:
                rec.outcome = verdict or "unresolved"
                return rec
            n = min(2 * n, measure["max_runs"])

    return run, tps, launches


def _refs(tps, items: list[str]) -> tuple[list[float], list[float]]:
    return [tps(items) for _ in range(8)], [tps([]) for _ in range(8)]


def test_two_independent_culprits_are_each_measured_with_their_share_within_the_launch_bound():
    items, truth = [f"p{i}.py" for i in range(8)], {"p2.py": -12.0, "p6.py": -8.0}
    covered, made = 0, []
    for seed in range(10):
        run, tps, launches = _box(truth, seed=seed)
        slow, fast = _refs(tps, items)
        res, found, notes = effects_search(items, run, slow=slow, fast=fast, runs=5, max_runs=15, measure=MEASURE)
        assert res is not None and found is not None, notes
        assert sorted(res.culprits) == ["p2.py", "p6.py"] and res.confirmed
        fitted = {c.path: c for c in culprit_effects(found)}
        covered += sum(fitted[p].ci_low <= t <= fitted[p].ci_high for p, t in truth.items())
        assert abs(sum(c.share for c in fitted.values()) - 1.0) < 0.1  # independent: the shares make the gap
        made.append(len(launches))
    assert covered >= 17  # 95 % intervals: at most a few of 20 miss
    assert sum(made) / len(made) <= 2 * 3 + 2


def test_patches_that_only_slow_things_together_are_not_two_independent_culprits():
    items = [f"p{i}.py" for i in range(8)]
    run, tps, launches = _box({}, pair=("p1.py", "p5.py"))
    slow, fast = _refs(tps, items)
    res, found, notes = effects_search(items, run, slow=slow, fast=fast, runs=5, max_runs=15, measure=MEASURE)
    assert res is None  # the slow/fast search, which finds interacting sets, decides
    assert found is not None and found.verdict in ("interaction", "unresolved") and not found.culprits


def test_a_trial_without_a_measurement_hands_over_to_the_slow_fast_search():
    items = [f"p{i}.py" for i in range(4)]
    run, tps, _ = _box({"p0.py": -15.0})
    slow, fast = _refs(tps, items)

    def broken(subset, purpose, measure, judge):
        return SimpleNamespace(samples=[], outcome="unresolved", cause="patch conflict: p1.py")

    res, found, notes = effects_search(items, broken, slow=slow, fast=fast, runs=5, max_runs=15, measure=MEASURE)
    assert res is None and found is None and "no measurement" in notes[0]


def test_independent_culprits_each_get_their_own_phase_and_the_fast_arm_is_profiled_once():
    from specdoctor.tools.checkout.bisect import independent_phases
    from specdoctor.tools.checkout.bisect_effects import CulpritEffect
    from tests.diagnosis.test_phase_effect import _times

    arms = {(): (1.1, 42.8), ("eagle_worker.py",): (2.1, 42.8), ("eagle_utils.py",): (1.1, 45.8)}
    profiled: list[tuple[str, ...]] = []

    def prof(sub, label):
        profiled.append(tuple(sub))
        return _times(*arms[tuple(sub)], seed=len(profiled)), ""

    effects = [CulpritEffect(path=p, effect_tps=-3.0, ci_low=-3.5, ci_high=-2.5, share=0.5, share_low=0.4,
                             share_high=0.6) for p in ("eagle_worker.py", "eagle_utils.py")]
    out, notes = independent_phases(effects, prof)
    phases = {c.path: c.phase_effect.phase if c.phase_effect else None for c in out}
    assert phases == {"eagle_worker.py": "draft", "eagle_utils.py": "verify"}, notes
    assert profiled.count(()) == 1 and len(profiled) == 3  # 1 + k launches
