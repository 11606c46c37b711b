"""What the diagnosis concludes: the verdict with its evidence chain, and the ranked next actions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["VerdictName", "Verdict", "ModelledGain", "PlanAction", "Diagnosis"]

VerdictName = Literal["no-regression", "code-regression", "environment", "baseline-not-reproducible", "inconclusive"]
"""The one verdict vocabulary (the report adds only `plan-only`, for a --dry-run that concludes nothing)."""


class Verdict(BaseModel):
    """The conclusion with its confidence and the chain of evidence that led there."""

    verdict: VerdictName
    confidence: float = Field(ge=0, le=1)
    sentence: str
    culprits: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    llm_made: bool = False


class ModelledGain(BaseModel):
    """A what-if model's gain on today's speculative tok/s: a point, a range and what it assumes (never measured)."""

    point: float
    low: float
    high: float
    assumptions: list[str] = Field(default_factory=list)


class PlanAction(BaseModel):
    """One ranked next action of the game plan."""

    title: str
    expected_gain: str
    gain_tps: float | None = Field(default=None, description="Expected gain in tok/s when it can be put as a number.")
    basis: Literal["measured", "modelled", "none"] = "modelled"
    cost: str = ""
    risk: str = ""
    detail: str = ""
    command: str | None = Field(default=None, description="The exact command or edit that carries it out.")
    confirmed: bool = Field(default=False, description="Fixes a cause that trials or measurements confirmed.")
    lever: str | None = Field(default=None, description="The lever it pulls (diagnosis.levers.LeverKind), if any.")
    modelled: ModelledGain | None = Field(default=None, description="The what-if model's gain for this lever, kept "
                                          "apart from any measurement.")
    measured_gain_tps: float | None = Field(default=None, description="What a trial measured for the same lever "
                                            "(tok/s), beside the model; None: not measured.")


class Diagnosis(BaseModel):
    """`diagnose()`'s answer: the verdict and the game plan that follows from it."""

    verdict: Verdict
    plan: list[PlanAction] = Field(default_factory=list)
