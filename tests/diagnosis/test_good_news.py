"""A finding's severity says what it means: a suspect cleared or the claimed figure reached is good news."""

from __future__ import annotations

from specdoctor.diagnosis.causes import CODE_CLEARED
from specdoctor.diagnosis.outcome import Verdict
from specdoctor.diagnosis.verdict import good_news


def test_cleared_suspects_and_a_reached_figure_are_good_news_and_causes_are_not():
    v = Verdict(verdict="baseline-not-reproducible", confidence=0.7, sentence="", reasons=[
        "claimed spec 94 is DIFFERENT from measured 60.0 tok/s",
        "removing every non-essential patch changes nothing (comparator SAME)",
        f"not tested: python/x.py: {CODE_CLEARED}",
        "not tested: NCCL_DEBUG: no trial can revert it",
        "reverting the confirmed causes reaches the claimed figure",
        "reverting the confirmed causes does not reach the claimed figure"])
    assert good_news(v) == v.reasons[1:3] + [v.reasons[4]]
