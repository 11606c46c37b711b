"""A subtraction whose trial-against-trial confirmation ends undecided buys more essentials-only runs in one more
launch (pooled with the first), instead of reading "undecided" as "the patches change nothing"."""

from __future__ import annotations

import random
import types
from typing import Any

from specdoctor.engine.actions import ActionOutcome
from specdoctor.engine.actions import subtract as sub
from specdoctor.engine.state import StateView
from specdoctor.models import MeasuredFact

ALL = [49.2, 48.2, 49.4, 46.1, 48.6, 44.5, 45.3, 48.9, 47.4, 44.1, 45.0, 46.3, 47.9, 46.0]  # noisy, ~47
FIRST = [49.4, 52.0, 49.8, 49.7, 48.5, 48.8, 52.1, 48.2]                                   # essentials, ~49.6


def _fake_measure(mean: float, launches: list[dict[str, Any]]):
    rng = random.Random(5)

    def measure_config(deps, view, *, label, speculative, results, runs, tree, more=None, **_):
        samples = [rng.gauss(mean, 0.8) for _ in range(runs)]
        while more is not None and (n := more(samples)) > 0:
            samples += [rng.gauss(mean, 0.8) for _ in range(n)]
        launches.append({"label": label, "runs": len(samples)})
        return MeasuredFact(label=label, samples=samples, median=sorted(samples)[len(samples) // 2])
    return measure_config


def _run(monkeypatch, mean: float) -> tuple[MeasuredFact, dict[str, Any], list[dict[str, Any]]]:
    launches: list[dict[str, Any]] = []
    monkeypatch.setattr(sub, "measure_config", _fake_measure(mean, launches))
    deps = types.SimpleNamespace(view=types.SimpleNamespace(progress=lambda *_: None))
    reduced, comparison = sub._more_essentials(deps, StateView({"params": {}}), ActionOutcome(), object(),
                                               MeasuredFact(samples=FIRST), ALL, 5, 2.4)
    return reduced, comparison, launches


def test_more_essentials_runs_decide_what_the_confirmation_left_undecided(monkeypatch):
    reduced, comparison, launches = _run(monkeypatch, 49.6)
    assert len(launches) == 1 and launches[0]["label"] == "essentials-only-again"
    assert reduced.samples[:len(FIRST)] == FIRST and len(reduced.samples) > len(FIRST)  # pooled
    assert comparison["outcome"] == "DIFFERENT" and comparison["verdict"] == "better"


def test_essentials_as_slow_as_all_patches_are_never_a_difference(monkeypatch):
    # must not fire: the second essentials launch runs like all patches; the pooled arm is no longer faster
    _, comparison, _ = _run(monkeypatch, 47.0)
    assert comparison["outcome"] != "DIFFERENT" or comparison["verdict"] != "better"
