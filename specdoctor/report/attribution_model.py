"""Optional report parts the diagnosis fills: gap attribution (causes with CIs) and the bisection's trials."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from specdoctor.models.delta import ReportCauseKind
from specdoctor.models.phases import PhaseEffect

__all__ = ["CauseKind", "Cause", "Attribution", "BisectTrial"]

CauseKind = ReportCauseKind


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Cause(_Model):
    """One confirmed (or candidate) cause and the part of the measured gap it explains."""

    name: str = Field(description="What differs, e.g. 'NCCL_PROTO=Simple set by sitecustomize.py'.")
    kind: CauseKind = "other"
    delta: float = Field(description="Its effect on the metric, in the attribution's unit (negative: slower).")
    ci_low: float | None = None
    ci_high: float | None = None
    confirmed: bool = Field(default=True, description="Measured by a trial that reverted it (not inferred).")
    fix: str | None = Field(default=None, description="The exact command or edit that removes it.")
    command_ids: list[int] = Field(default_factory=list, description="Indices into Report.commands.")
    metric: str | None = Field(default=None, description="The figure its effect was measured on, when not the "
                               "attribution's (e.g. a bisection on spec tok/s beside a baseline gap): shown apart, "
                               "never subtracted from the gap.")
    phase_effect: PhaseEffect | None = Field(default=None, description="Its effect on the phase it touches, from "
                                             "both arms of its confirming comparison profiled (None: not claimed).")
    share_from: str | None = Field(default=None, description="The comparison its share was measured by (the same "
                                   "tree with and without it), named; None: its revert trials (the evidence).")


class Attribution(_Model):
    """The measured gap (reference figure → today's) split into causes; what is left is noise or unexplained."""

    metric: str = Field(default="spec", description="Which figure, e.g. 'spec' or 'baseline'.")
    unit: str = "tok/s"
    reference: float = Field(description="The figure the gap is measured from (claimed or the good run).")
    reference_label: str = "claimed"
    measured: float = Field(description="Today's median.")
    measured_ci_low: float | None = None
    measured_ci_high: float | None = None
    causes: list[Cause] = Field(default_factory=list)
    derived: bool = Field(default=False, description="True when the report layer derived it (no diagnosis input).")

    @property
    def gap(self) -> float:
        return self.measured - self.reference

    def in_unit(self) -> list[Cause]:
        """The causes measured on this attribution's figure (the ones that split its gap)."""
        return [c for c in self.causes if c.metric in (None, self.metric)]

    def other_unit(self) -> list[Cause]:
        """Confirmed causes measured on another figure: reported beside the gap, not in it."""
        return [c for c in self.causes if c.metric not in (None, self.metric) and c.confirmed]

    @property
    def unexplained(self) -> float:
        return self.gap - sum(c.delta for c in self.in_unit() if c.confirmed)


class BisectTrial(_Model):
    """One trial server of the bisection: the patches that were in, and what the comparator said."""

    index: int
    patches: list[str] = Field(default_factory=list)
    outcome: str = Field(description="regressed / same / unresolved (or starts / fails).")
    median: float | None = None
    samples: list[float] = Field(default_factory=list)
    purpose: str = ""
    cause: str | None = None
