"""Every claim held today spares the trials that explain a gap; a SAME too imprecise to rule out a shortfall does not."""

from __future__ import annotations

from typing import Any

from specdoctor.engine.gap import claim_held, read_gap
from specdoctor.engine.state import StateView
from specdoctor.models.facts import ClaimFact


def _claim(claimed: float, median: float, lo: float, hi: float, outcome: str, *, higher: bool = True) -> ClaimFact:
    return ClaimFact(claimed=claimed, median=median, ci_low=lo, ci_high=hi, outcome=outcome,  # type: ignore[arg-type]
                     pct_change=100 * (median - claimed) / claimed, higher_is_better=higher)


def _view(claims: dict[str, ClaimFact], expect: dict[str, float] | None = None,
          measured: bool = True) -> StateView:
    facts: dict[str, Any] = {"claims": {k: c.model_dump(mode="json") for k, c in claims.items()}}
    if measured:
        facts["measure"] = {"baseline": {"median": 70.0}, "spec": {"median": 150.0}}
    return StateView({"params": {"expect": expect or {k: c.claimed for k, c in claims.items()}}, "results": {},
                      "decisions": [], "facts": facts})


def test_precise_same_and_bettered_claims_hold_and_leave_no_gap():
    held = {"baseline": _claim(71, 70.7, 69.9, 73.6, "SAME"), "spec": _claim(152, 170, 165, 175, "DIFFERENT")}
    gap = read_gap(_view(held))
    assert gap.judged and gap.held and "no gap to explain" in gap.why


def test_a_same_whose_interval_reaches_a_material_shortfall_is_no_answer():
    # a first look on a noisy box: SAME, but the interval still holds a 20 % regression
    wide = _claim(100, 97, 80, 112, "SAME")
    ok, why = claim_held(wide)
    assert not ok and "not ruled out" in why
    assert not read_gap(_view({"spec": wide})).held
    # a time claim is worse upwards: verify 19 ms claimed, interval up to 23 ms
    assert not claim_held(_claim(19, 19.5, 18.0, 23.0, "SAME", higher=False))[0]
    assert claim_held(_claim(19, 19.2, 18.5, 19.9, "SAME", higher=False))[0]


def test_a_shortfall_an_undecided_or_a_missing_claim_leaves_the_gap_open():
    base = _claim(71, 70.7, 69.9, 73.6, "SAME")
    assert not read_gap(_view({"baseline": base, "spec": _claim(152, 120, 118, 123, "DIFFERENT")})).held
    assert not read_gap(_view({"baseline": base, "spec": _claim(152, 150, 100, 200, "UNKNOWN")})).held
    missing = read_gap(_view({"baseline": base}, expect={"baseline": 71, "spec": 152}))
    assert not missing.held and "spec not measured" in missing.why
    assert not read_gap(_view({}, expect={})).held  # no claim: nothing says the box is as it should be


def test_before_anything_was_measured_nothing_is_spared():
    gap = read_gap(_view({"spec": _claim(152, 150, 149, 151, "SAME")}, measured=False))
    assert not gap.judged and not gap.held
