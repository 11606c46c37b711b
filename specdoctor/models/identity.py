"""What today's run shares with its reference, decided before anything is stopped (`facts.identity`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specdoctor.models.facts import FactModel

__all__ = ["Sameness", "IdentityFact", "BudgetFact"]

Sameness = Literal["identical", "differs", "unknown"]


class IdentityFact(FactModel):
    """Which trials the reference makes unnecessary. 'unknown' never spares a trial: only equal digests do."""

    code: Sameness = Field(default="unknown", description="The checkout's content digest against the good run's.")
    launch: Sameness = Field(default="unknown", description="The launch line's digest (port and host aside).")
    env: Sameness = Field(default="unknown", description="The workers' tuning variables' digest.")
    claims_hold_running: bool = Field(default=False, description="Every claim is one the running speculative server "
                                      "measures (no baseline claim) and each held on it: nothing to explain.")
    notes: list[str] = Field(default_factory=list, description="One line per decision, with the digests compared.")

    @property
    def config_identical(self) -> bool:
        """Same flags and same variables: the attribute step has no configuration to revert."""
        return self.launch == "identical" and self.env == "identical"

    @property
    def settled(self) -> bool:
        """Nothing left to decide on the box: the run ends without stopping the user's server."""
        return self.claims_hold_running


class BudgetFact(FactModel):
    """`--budget MINUTES` of box time, and where the run stopped to keep it (`facts.budget`)."""

    minutes: float = Field(gt=0, description="Box minutes the user allows (launches, runs, restarts).")
    host: str = Field(default="HOST", description="The host, as the command to continue names it.")
    started_at: float = Field(description="When the box time began to count (the plan, before the stop), epoch s.")
    stopped_before: str | None = Field(default=None, description="The first step not run to keep the budget.")
    reason: str = ""
    not_run: list[str] = Field(default_factory=list, description="Every launching step skipped for the budget.")
