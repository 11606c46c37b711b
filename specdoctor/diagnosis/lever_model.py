"""What every lever model shares: the `Lever` record, the cycle model's tok/s at one changed term, and how a
confirmed cause's trial is set beside a model (`levers.py` builds the graph and draft-steps levers, `nccl_lever.py` the
NCCL one; both read this, neither the other).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.diagnosis.attribution import attribution
from specdoctor.diagnosis.facts import Case
from specdoctor.models import BreakevenAnalysis, CauseFact

__all__ = ["LeverKind", "Lever", "REAL_VERIFY_OVER_DECODE", "WORTH", "tps_at", "confirmed_cause", "with_measured"]

LeverKind = Literal["verify-graph", "cuda-graph", "draft-steps", "nccl", "attention-backend"]

WORTH = 0.05
"""A modelled lever below 5 % of today's tok/s is within what the model cannot tell apart: not proposed."""

REAL_VERIFY_OVER_DECODE = 1.04
"""A graph-replayed verify over 4 tokens against a graph-replayed plain decode step at batch 1, on the real engine
(SGLang 0.5.17, one H200, `tests/fixtures/sglang-0.5.17-h200`: verify 1.805 ms GPU in the profiler trace, decode
1000 / 576 tok/s = 1.736 ms from the no-speculation server's Decode lines; a test recomputes it from them)."""


class Lever(BaseModel):
    """One lever: its modelled gain on today's speculative tok/s (a range and a point) and, when a trial measured the
    same lever, that measurement beside it."""

    kind: LeverKind
    title: str
    today_tps: float = Field(description="Today's measured speculative tok/s the gain is added to.")
    gain_tps: float = Field(description="Modelled gain, the point estimate (tok/s).")
    gain_low: float
    gain_high: float
    assumptions: list[str] = Field(default_factory=list)
    command: str | None = Field(default=None, description="What to change in the launch line (or run) to try it.")
    cost: str = "low (one relaunch)"
    risk: str = "low"
    measured_tps: float | None = Field(default=None, description="The gain a trial measured for the same lever "
                                       "(tok/s on the speculative figure); None: not measured.")
    measured_by: str | None = Field(default=None, description="The confirmed cause whose trial measured it.")

    def range_text(self) -> str:
        return f"+{self.gain_tps:.1f} tok/s [{self.gain_low:+.1f}, {self.gain_high:+.1f}]"


def tps_at(be: BreakevenAnalysis, spec: float, *, verify_ms: float | None = None, steps: int | None = None,
           draft_ms: float | None = None) -> float | None:
    """Today's measured tok/s scaled by the modelled cycle with one term changed (τ from α at the new k)."""
    from specdoctor.tools.breakeven.breakeven import accept_length

    if be.verify_ms is None or be.accept_len is None:
        return None
    k = be.steps
    today_cycle = k * (be.draft_ms or 0.0) + be.verify_ms + be.overhead_ms
    k2 = steps if steps is not None else k
    cycle = k2 * (draft_ms if draft_ms is not None else be.draft_ms or 0.0) + (
        verify_ms if verify_ms is not None else be.verify_ms) + be.overhead_ms
    tau2 = be.accept_len if k2 == k or be.alpha is None else accept_length(be.alpha, k2)
    if cycle <= 0 or today_cycle <= 0:
        return None
    return spec * (tau2 / be.accept_len) * (today_cycle / cycle)


def confirmed_cause(case: Case, keys: tuple[str, ...]) -> CauseFact | None:
    """The confirmed cause whose trial pulled this lever: a setting (launch flag, variable) whose name holds one of
    `keys`. A patch is never matched, by its file name or by the phase its revert moved: a revert that speeds verify
    up need not be what makes verify replay a graph (single-culprit's patch slows an eager verify)."""
    for c in attribution(case).confirmed():
        if c.kind != "code" and any(k in c.key.lower() for k in keys):
            return c
    return None


def with_measured(lever: Lever, cause: CauseFact | None) -> Lever:
    """The trial's measurement beside the model: only on the figure the model predicts (speculative tok/s); a
    trial that measured another figure is named, not compared."""
    if cause is None:
        return lever
    lever.measured_by = cause.name
    if cause.effect_tps is not None and cause.metric == "spec":
        lever.measured_tps = -cause.effect_tps
    elif cause.effect_tps is not None:
        lever.assumptions.append(f"its trial measured the {cause.metric} figure ({-cause.effect_tps:+.1f} tok/s), "
                                 "not the speculative one this model predicts")
    return lever
