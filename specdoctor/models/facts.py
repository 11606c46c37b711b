"""Facts the engine's actions save in the run state (read with `StateView.fact(path, Model)`).

Facts are written by actions, not tools, so they have no registry entry; these models are their contract.
They ignore keys they do not name (an action may keep more), but a named key of the wrong type fails.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

from specdoctor.models.measurement import Measurement
from specdoctor.models.phases import PhaseTimes
from specdoctor.models.workload import Workload

__all__ = ["MATERIAL_SHORTFALL", "FactModel", "MeasuredFact", "MeasureFacts", "ClaimFact", "Claims", "ComparisonFact",
           "SubtractionFact", "NcclFact", "TopologyFact", "ServerFact"]


MATERIAL_SHORTFALL = 0.10
"""The smallest shortfall from a claim that a diagnosis must explain (the bisection's default magnitude, 10 %)."""


class FactModel(BaseModel):
    """Base of fact models: named keys are checked; other keys a writer keeps are kept too (the typed record and its
    checkpoint hold the same fact)."""

    model_config = ConfigDict(extra="allow")


class MeasuredFact(Measurement, FactModel):
    """One measured configuration as an action saved it (a benchmark's output plus label/env), or its error: the
    shared `Measurement` plus what only the fact keeps. Read from the saved benchmark output as it is (its other
    keys kept, as its writer wrote them), and handed to the report as it is."""

    model_config = ConfigDict(extra="allow", validate_assignment=False)  # a fact's (keeps its writer's keys), not the strict model's

    label: str = ""
    decode_samples: list[float] = Field(default_factory=list, description="Per run, prefill excluded.")
    findings: list[dict[str, Any] | str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    workload: Workload | None = Field(default=None, description="What it was measured on (the benchmark's).")
    error: str | None = Field(default=None, description="Why it could not be measured.")
    status: str | None = None
    phases: PhaseTimes | None = Field(default=None, description="The engine profiler's phase times on the same "
                                      "server, taken while it was up (an arm a later comparison may need: no launch "
                                      "then).")

    def also_measured(self) -> MeasuredFact | None:
        """The same server measured a second time with the workload recorded behind the claims (its `also`)."""
        raw = (self.model_extra or {}).get("also")
        return MeasuredFact.model_validate(raw) if raw is not None else None

    def with_also(self, also: MeasuredFact | None) -> MeasuredFact:
        """A copy holding `also` (kept as JSON, as the checkpoint holds it); None takes it out."""
        data = self.model_dump(mode="json")
        data.pop("also", None)
        if also is not None:
            data["also"] = also.model_dump(mode="json")
        return MeasuredFact.model_validate(data)

    def finding_texts(self) -> list[str]:
        """Each finding in one line (the benchmark's findings carry a `message`)."""
        return [str(f.get("message") or f.get("title") or f) if isinstance(f, dict) else str(f) for f in self.findings]


class MeasureFacts(FactModel):
    """`facts.measure`: the reproduce step's two configurations."""

    baseline: MeasuredFact | None = None
    spec: MeasuredFact | None = None

    def items(self) -> list[tuple[str, MeasuredFact]]:
        return [(k, m) for k, m in (("baseline", self.baseline), ("spec", self.spec)) if m is not None]


class ClaimReading(FactModel):
    """The claim against the other reading of today's runs (kept to say why the basis was chosen)."""

    median: float | None = None
    pct_change: float | None = None
    outcome: str | None = None


class ClaimFact(FactModel):
    """A claimed figure compared with the measured samples."""

    claimed: float | None = None
    outcome: Literal["DIFFERENT", "SAME", "UNKNOWN"] | None = None
    pct_change: float | None = None
    p_value: float | None = None
    basis: Literal["end-to-end", "decode"] = Field(
        default="end-to-end", description="What the claim was compared with: tok/s over the whole request, or "
        "with the prefill excluded (how a claim read from a server log or TPOT was measured).")
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    end_to_end: ClaimReading | None = Field(default=None, description="With basis 'decode': the end-to-end reading.")
    unit: str = Field(default="tok/s", description="tok/s, ms or tokens (an accept length).")
    higher_is_better: bool = Field(default=True, description="False for times (verify_ms, draft_ms, tpot_ms).")
    source: str = Field(default="--expect", description="Where the claimed figure came from: '--expect' or 'the "
                        "good run's fingerprint' (its measurements, when no --expect was given).")
    measured_by: str = Field(default="", description="What today's samples are, when not the benchmark's tok/s.")

    @field_validator("unit", mode="before")
    @classmethod
    def _tok_s_unless_said(cls, v: Any) -> Any:
        """A claim recorded before units (the comparator's empty unit) was a tok/s claim."""
        return v or "tok/s"

    @property
    def not_reached(self) -> bool:
        """Measured significantly worse than the claim: the only difference a regression can be. Today better than
        the claim (DIFFERENT, faster) reproduces it and more."""
        if self.outcome != "DIFFERENT" or self.pct_change is None:
            return self.outcome == "DIFFERENT"
        return self.pct_change < 0 if self.higher_is_better else self.pct_change > 0


class Claims(RootModel[dict[str, ClaimFact]]):
    """`facts.claims`: metric name → its comparison."""


class ComparisonFact(FactModel):
    """A comparator call as an action saved it."""

    outcome: str | None = None
    verdict: str | None = None
    pct_change: float | None = None
    p_value: float | None = None


class SubtractionFact(FactModel):
    """`facts.subtraction`: all patches vs essentials only, and whether the tree came back."""

    outcome: str | None = None
    comparison: ComparisonFact | None = None
    problem: str | None = None
    all_patches: MeasuredFact | None = None
    essentials_only: MeasuredFact | None = None
    applied: list[str] = Field(default_factory=list)
    ambiguous: list[str] = Field(default_factory=list)
    restored: bool | None = None
    restore: dict[str, Any] | None = None

    @property
    def made_faster(self) -> bool:
        """Removing the non-essential patches made it faster (comparator DIFFERENT, better)."""
        return self.outcome == "DIFFERENT" and self.comparison is not None and self.comparison.verdict == "better"


class NcclFact(FactModel):
    """`facts.nccl`: the NCCL setting that won end to end, if any."""

    best: str | None = None
    best_gain_pct: float | None = None
    launcher_drops: bool | None = None
    env: dict[str, str] | None = None
    unset: list[str] = Field(default_factory=list, description="Variables the recommendation removes.")


class TopologyFact(FactModel):
    """`facts.topology`: GPU count and interconnect."""

    gpu_count: int = 0
    detail: str | None = None
    interconnect: Literal["nvlink", "pcie"] | None = None


class ServerFact(FactModel):
    """`facts.server`: the running server the run found (if any)."""

    running: bool = False
    port: int | None = None
    pid: int | None = None
    argv: list[str] = Field(default_factory=list)
    args: dict[str, Any] = Field(default_factory=dict)
    workers: int = 0
    launch: str | None = None
    log_path: str | None = None
