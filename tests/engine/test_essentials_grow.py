"""The essentials search's no-patch server takes more runs while its comparison with today's runs is undecided, and
the subtraction takes those runs when they reached its cap, instead of launching the very same tree again only to
take the same looks (#46: two-sources-a100 and two-sources-one-shared relaunched it). Must not fire: runs short of
the cap and undecided still mean a launch (test_essentials_bench_reuse's "undecided" case)."""

from __future__ import annotations

import random
from types import SimpleNamespace

from specdoctor.engine.actions.subtract import _Arms, _searched, _Step
from specdoctor.engine.state import StateView
from specdoctor.stats.comparator import GROWING_CAP, GrowingArm
from specdoctor.tools.checkout import bisect
from specdoctor.tools.checkout.bisect import Bench, Essentials, TreeIdentity, Trial
from specdoctor.tools.checkout.trial_tree import TrialTree

TODAY = [70.0, 71.5, 69.0, 72.0, 70.5, 71.0, 69.5, 70.8]


def _tree() -> TrialTree:
    return TrialTree(name="t", path="/t", head="abc", pythonpath="/t/python", applied_files=[], applied_hunks={})


def _step(samples: list[float]) -> _Step:
    trial = Trial(patches=[], outcome="starts", purpose="no patches", tree=TreeIdentity.of(_tree()),
                  benchmark={"samples": samples, "median": sorted(samples)[len(samples) // 2]})
    found = Essentials(essential=[], source="search", launches=1, trials=[trial])
    stored = {"tool": "find_essential_patches", "status": "ok", "summary": found.summary_line(),
              "output": found.model_dump(mode="json")}
    return _Step(deps=SimpleNamespace(view=None), view=StateView({"params": {}, "facts": {},
                                                                  "results": {"essentials": stored}}),
                 out=SimpleNamespace(results={}), runs=5)


def _half_way(n: int, seed: int = 3) -> list[float]:
    """Runs as noisy as today's, their median a little off: the comparator cannot decide."""
    rng = random.Random(seed)
    return [72.0 + rng.uniform(-6.0, 6.0) for _ in range(n)]


def test_undecided_runs_at_the_cap_are_taken_not_relaunched():
    looks = GrowingArm(TODAY, 5)
    runs = _half_way(GROWING_CAP)
    assert looks.final(runs)["outcome"] == "UNKNOWN"  # the case: undecided, but at the cap
    arms = _Arms()
    got = _searched(_step(runs), arms, _tree(), looks, "essentials only")
    assert got is not None and len(got.samples) == GROWING_CAP
    assert "undecided at the cap" in arms.notes[-1] and "no launch" in arms.notes[-1]


def test_undecided_runs_short_of_the_cap_are_launched():
    looks = GrowingArm(TODAY, 5)
    runs = _half_way(5)
    assert looks.final(runs)["outcome"] == "UNKNOWN" and looks.more(runs) > 0
    arms = _Arms()
    assert _searched(_step(runs), arms, _tree(), looks, "essentials only") is None
    assert "launched for more" in arms.notes[-1]


def _grown(first: list[float], later: list[float], monkeypatch) -> Trial:
    queue = list(later)

    def measure(handle, *, runs, **_kw):
        taken = [queue.pop(0) for _ in range(min(runs, len(queue)))]
        return SimpleNamespace(samples=taken)

    monkeypatch.setattr(bisect, "measure_", measure)
    rec = Trial(patches=[], outcome="starts", purpose="no patches", samples=list(first),
                benchmark={"samples": list(first)})
    bisect._grow(rec, handle=None, bench=Bench(runs=5, against=TODAY))
    return rec


def test_the_no_patch_server_grows_while_undecided(monkeypatch):
    rec = _grown(_half_way(5), _half_way(30, seed=4), monkeypatch)
    assert len(rec.samples) > 5 and rec.benchmark is not None and rec.benchmark["samples"] == rec.samples
    assert len(rec.samples) <= GROWING_CAP


def test_a_decided_comparison_takes_no_more_runs(monkeypatch):
    rec = _grown([90.0, 90.5, 89.8, 90.2, 90.9], [90.0] * 30, monkeypatch)
    assert len(rec.samples) == 5
