"""A culprit's share comes from its own confirming comparison (every patch with and without it), the trial named."""

from __future__ import annotations

from specdoctor.diagnosis.attribution import cause_line
from specdoctor.diagnosis.causes import confirming_share
from specdoctor.models import AttributionFact, CauseFact, SubtractionFact
from specdoctor.models.facts import MeasuredFact
from specdoctor.tools.checkout.bisect import BisectResult, Trial

ALL = ["a.py", "b.py", "culprit.py"]


def _bis(trials: list[Trial]) -> BisectResult:
    return BisectResult(verdict="culprit", culprits=["culprit.py"], confirmed=True, launches=len(trials),
                        naive_launches=4, order=ALL, trials=trials)


def _sub() -> SubtractionFact:
    # The essentials search's arms (no patch vs all patches): NOT the culprit's comparison (real story: -138.6)
    return SubtractionFact(all_patches=MeasuredFact(samples=[300.0, 302.0, 301.0], median=301.0),
                           essentials_only=MeasuredFact(samples=[440.0, 438.0, 439.0], median=439.0))


def test_the_share_is_all_patches_minus_the_tree_without_the_culprit():
    trials = [Trial(patches=ALL, outcome="regressed", samples=[300.0, 303.0, 299.0]),
              Trial(patches=["culprit.py"], outcome="regressed", samples=[320.0, 318.0, 322.0]),
              Trial(patches=["a.py", "b.py"], outcome="same", samples=[690.0, 688.0, 692.0])]
    (eff, lo, hi), share_from = confirming_share(_bis(trials), _sub())
    assert eff is not None and round(eff) == -390 and lo is not None and hi is not None and lo <= eff <= hi
    assert share_from == "bisection trial 3 (every patch but culprit.py) vs bisection trial 1 (all patches)"


def test_without_an_all_patches_trial_the_subtractions_all_patches_arm_is_the_same_tree():
    trials = [Trial(patches=["b.py", "a.py"], outcome="same", samples=[690.0, 688.0, 692.0])]
    (eff, _, _), share_from = confirming_share(_bis(trials), _sub())
    assert eff is not None and round(eff) == -389 and "subtraction's all-patches arm" in share_from


def test_no_trial_of_the_tree_without_it_means_no_share_not_the_essentials_arms():
    trials = [Trial(patches=["culprit.py"], outcome="regressed", samples=[320.0, 318.0, 322.0])]
    (eff, lo, hi), why = confirming_share(_bis(trials), _sub())
    assert (eff, lo, hi) == (None, None, None) and "was not measured" in why


def test_the_cause_line_names_the_comparison():
    c = CauseFact(name="local patch culprit.py", kind="code", key="culprit.py", effect_tps=-390.0, confirmed=True,
                  method="bisection", share_from="bisection trial 3 (every patch but culprit.py) vs trial 1")
    line = cause_line(c, AttributionFact(reference_tps=700.0, measured_tps=300.0))
    assert "−390.0 tok/s" in line and "measured by bisection trial 3" in line
