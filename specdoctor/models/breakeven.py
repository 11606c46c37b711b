"""The break-even analysis of speculative decoding (what the breakeven tool returns and the report embeds)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["KPrediction", "TargetRequirement", "CycleTerm", "TermChange", "BreakevenAnalysis"]


class KPrediction(BaseModel):
    """Predicted throughput at k draft steps for the measured α."""

    steps: int
    draft_tokens: int
    accept_len: float
    cycle_ms: float
    tps: float
    speedup: float | None = None


class TargetRequirement(BaseModel):
    """What a drafter must reach for a target speedup."""

    speedup: float
    steps: int = Field(description="k the requirement is computed at (the measured/assumed one).")
    tau_needed: float
    alpha_needed: float | None = Field(description="None when the τ needed exceeds k+1 (unreachable at this k).")
    best_steps: int | None = Field(default=None, description="k needing the lowest α under the cycle model.")
    alpha_at_best: float | None = None


class CycleTerm(BaseModel):
    """One term of the speculative cycle time."""

    name: Literal["draft", "verify", "overhead", "host", "cycle"] = Field(description="'host': the measured cycle "
                                                                          "(τ / spec tok/s) less the profiled phases.")
    ms: float
    share: float


class TermChange(BaseModel):
    """How one term moved between the reference (good) run and this run, and what it did to τ*."""

    name: str
    before_ms: float
    after_ms: float
    delta_ms: float
    delta_tau_star: float = Field(description="Exact share of the change in τ* (terms add up to the total).")


class BreakevenAnalysis(BaseModel):
    """Break-even of speculative decoding for one run (the report embeds this model)."""

    decode_ms: float = Field(description="Plain-decode time per token, ms.")
    baseline_tps: float
    cycle_ms: float = Field(description="Speculative cycle time, ms: the measured one (τ / spec tok/s, host time "
                            "included) when known, else k·t_draft + t_verify + overhead.")
    cycle_source: Literal["components", "throughput"]
    host_ms: float = Field(default=0.0, description="Measured cycle less the profiled phases (host time outside "
                           "them); the model for other k carries it as a constant per cycle.")
    model_disagrees: bool = Field(default=False, description="The profiled phases' model and the measurement say "
                                  "opposite things (one wins, the other loses).")
    tau_star: float = Field(description="Break-even accept length τ* = cycle / t_decode.")
    tau_star_components: float | None = Field(default=None, description="(k·t_draft + t_verify + overhead)/t_decode.")
    tau_star_shortcut: float | None = Field(default=None, description="τ_obs · baseline_tps / spec_tps.")
    accept_len: float | None = None
    margin: float | None = Field(default=None, description="τ − τ*: negative means speculation loses.")
    spec_tps: float | None = None
    spec_tps_predicted: bool = False
    speedup: float | None = None
    steps: int
    steps_assumed: bool = False
    draft_ms: float | None = None
    verify_ms: float | None = None
    overhead_ms: float = 0.0
    phase_source: str | None = Field(default=None, description="Where draft/verify/overhead came from (e.g. "
                                     "'profiler-gpu': measured by the engine's profiler); None: typed or absent.")
    alpha: float | None = Field(default=None, description="Per-token acceptance from τ at k.")
    verify_model: str = Field(default="", description="How t_verify(N) is modelled for other k.")
    predictions: list[KPrediction] = Field(default_factory=list)
    best_steps: int | None = None
    targets: list[TargetRequirement] = Field(default_factory=list)
    terms: list[CycleTerm] = Field(default_factory=list)
    dominant_term: str | None = None
    changes: list[TermChange] = Field(default_factory=list)
    moved_term: str | None = None
    verdict: str = ""
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        return self.verdict
