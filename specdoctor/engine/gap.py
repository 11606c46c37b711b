"""Is there a gap to explain? Read once the claims were judged on today's measurements (after the reproduce step).

When every claimed figure held today — each measured, none short of its claim, and each SAME one measured precisely
enough that a material shortfall is ruled out — the trials that explain a gap (essentials, subtraction,
bisection, revert trials, an NCCL A/B) have nothing to explain: they are box time the answer does not need. A SAME
whose confidence interval still reaches a material shortfall is no such answer (a regression may hide in the noise
of a first look), so the trials run.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from specdoctor.engine.state import StateView
from specdoctor.models import Claims
from specdoctor.models.facts import MATERIAL_SHORTFALL, ClaimFact

__all__ = ["MATERIAL_SHORTFALL", "GapReading", "claim_held", "read_gap"]


class GapReading(BaseModel):
    """Whether today's measurements leave a gap to the claims, and why (one line for the decisions log)."""

    judged: bool = Field(description="The claims were judged on today's measurements (reproduce ran).")
    held: bool = Field(description="Every claimed figure was measured and held, a material shortfall ruled out.")
    why: str


def claim_held(c: ClaimFact, material: float = MATERIAL_SHORTFALL) -> tuple[bool, str]:
    """One claim held today: reached or bettered (DIFFERENT the good way), or SAME with the interval's worse end
    within `material` of the claim."""
    if c.claimed is None or c.outcome is None:
        return False, "not compared"
    if c.outcome == "UNKNOWN":
        return False, "comparator undecided"
    if c.not_reached:
        return False, f"not reached ({(c.pct_change or 0.0):+.1f} %)"
    if c.outcome == "DIFFERENT":
        return True, "bettered"
    worse_end = c.ci_low if c.higher_is_better else c.ci_high
    if worse_end is None:
        return False, "SAME without an interval"
    shortfall = (c.claimed - worse_end) / c.claimed if c.higher_is_better else (worse_end - c.claimed) / c.claimed
    if shortfall > material:
        return False, (f"SAME, but its interval reaches {worse_end:g} {c.unit}, {100 * shortfall:.0f} % short: "
                       f"a shortfall of {100 * material:g} % is not ruled out")
    return True, "SAME"


def read_gap(view: StateView) -> GapReading:
    """The claims as the reproduce step judged them (`facts.claims`) against every figure the user claimed."""
    measured = view.run_facts.measure
    if measured is None or (measured.baseline is None and measured.spec is None):
        return GapReading(judged=False, held=False, why="nothing measured yet")
    claims = (view.fact("claims", Claims) or Claims({})).root
    if not claims:
        return GapReading(judged=True, held=False, why="no claim to hold: every trial may explain something")
    missing = sorted(set(view.params.expect or {}) - set(claims))
    if missing:
        return GapReading(judged=True, held=False, why=f"{', '.join(missing)} not measured today")
    readings = {k: claim_held(c) for k, c in claims.items()}
    bad = [f"{k}: {why}" for k, (ok, why) in readings.items() if not ok]
    if bad:
        return GapReading(judged=True, held=False, why="; ".join(bad))
    return GapReading(judged=True, held=True, why="every claim held today (" + ", ".join(
        f"{k} {c.claimed:g} {c.unit} {readings[k][1]}" for k, c in claims.items()) + "): no gap to explain")
