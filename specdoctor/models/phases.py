"""Per-cycle phase times of a speculative server (draft, verify, draft-extend, plain decode) and their source."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["PhaseSource", "PhaseStat", "PhaseTimes", "ProfilerOverhead", "PhaseName", "PhaseDelta", "PhaseEffect"]

PhaseSource = Literal["profiler-gpu", "profiler-cpu", "derived"]
PhaseName = Literal["draft", "verify", "draft_extend", "decode", "sample"]


class PhaseStat(BaseModel):
    """One phase's time per cycle: the median of its samples with a 95 % bootstrap CI, and where it came from."""

    ms: float
    samples: list[float] = Field(default_factory=list)
    ci: tuple[float, float] | None = None
    source: str = Field(description="e.g. 'profiler trace, GPU time of step[TARGET_VERIFY …]' or 'derived: …'.")
    cpu_ms: float | None = Field(default=None, description="Median CPU (launch) time of the same ranges.")
    host_samples: list[float] = Field(default_factory=list, description="Host ms per sample: the gap before each "
                                      "range opened (since the cycle's previous phase range closed) plus how long it "
                                      "stayed open after its GPU work ended. A host stall (a sync, then a sleep or "
                                      "Python work) grows these, not the GPU time.")


class ProfilerOverhead(BaseModel):
    """Throughput of the same requests without and with the profiler on."""

    tps_without: float
    tps_with: float

    @property
    def pct(self) -> float:
        return 100.0 * (self.tps_without - self.tps_with) / self.tps_without


class PhaseTimes(BaseModel):
    """Per-cycle phase times of one server (ms); `source` says which instrument gave them."""

    source: PhaseSource
    measured_on: str = Field(default="", description="Which server and runs: e.g. 'your running server, 3 profiled "
                             "runs of 2 requests' or a trial's label (a phase table says which runs it comes from).")
    draft_ms: PhaseStat | None = Field(default=None, description="One draft step (the draft range / k).")
    draft_cycle_ms: PhaseStat | None = Field(default=None, description="All k draft steps of a cycle.")
    verify_ms: PhaseStat | None = None
    draft_extend_ms: PhaseStat | None = None
    sample_ms: PhaseStat | None = Field(default=None, description="Logits and rejection sampling per cycle, where "
                                        "the engine's trace times it apart from verify (vLLM).")
    decode_ms: PhaseStat | None = Field(default=None, description="One plain decode step.")
    cycle_ms: PhaseStat | None = Field(default=None, description="Draft + verify + draft-extend, per cycle.")
    steps: int | None = Field(default=None, description="Draft steps k per cycle (the server's launch line).")
    phases: list[PhaseName] | None = Field(default=None, description="The phases of a speculative cycle the "
                                           "engine's trace times (its `phases`: SGLang draft, verify, "
                                           "draft_extend; vLLM draft, verify, sample); None: not recorded.")
    wall_ms: PhaseStat | None = Field(default=None, description="Each decode cycle's wall time in the trace (its "
                                      "run_batch start to the next one's): what the parts below add up to.")
    idle_before_ms: dict[str, PhaseStat] = Field(default_factory=dict, description="Per phase, the GPU idle before "
                                                 "its GPU work in each cycle: host time it waited on, before or "
                                                 "inside its range.")
    rest_ms: PhaseStat | None = Field(default=None, description="Each cycle's wall after its last phase's GPU work "
                                      "(sampling, output processing, the scheduler's loop).")
    measured_cycle_ms: float | None = Field(default=None, description="The cycle from outside the trace: 1000 x "
                                            "accept length / tok/s of the profiled runs (host time included).")
    cycles: int = 0
    trace_path: str | None = None
    overhead: ProfilerOverhead | None = None
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        parts = [f"{n} {s.ms:.2f} ms" for n, s in (("draft/step", self.draft_ms), ("verify", self.verify_ms),
                                                   ("draft-extend", self.draft_extend_ms), ("sample", self.sample_ms),
                                                   ("decode", self.decode_ms))
                 if s is not None]
        over = f"; profiler overhead {self.overhead.pct:.1f} %" if self.overhead else ""
        return f"{self.source}: " + ", ".join(parts) + f" ({self.cycles} cycles){over}"


class PhaseDelta(BaseModel):
    """One phase, slow arm minus fast arm (ms; a draft or plain-decode step per step, the others per cycle), with a
    bootstrap CI."""

    phase: PhaseName
    per: Literal["step", "cycle"] = "cycle"
    basis: Literal["gpu", "host"] = Field(default="gpu", description="'gpu': the phase's GPU time (or, on a trace "
                                          "without GPU events, its range); 'host': its host-only time (the gap "
                                          "before its range and the time it stays open after its GPU work), read "
                                          "when no phase's GPU time grew or the host grew far more "
                                          "(stats.phases.phase_effect).")
    delta_ms: float
    ci: tuple[float, float]
    slow_ms: float
    fast_ms: float
    moved: bool = Field(description="CI excludes 0 and |delta| >= stats.phases.MATERIAL_PCT % of the fast arm.")

    def line(self) -> str:
        name = self.phase.replace("_", "-")
        host = " (host time: the host held it, not its GPU work)" if self.basis == "host" else ""
        return f"{name} {self.delta_ms:+.1f} ms [{self.ci[0]:.1f}, {self.ci[1]:.1f}] per {self.per}{host}"


class PhaseEffect(PhaseDelta):
    """A confirmed cause's effect on the phase it touches: the moved phase with the largest change per cycle,
    measured by profiling both arms of the comparison that confirmed it; `phases` keeps every phase's delta."""

    source: str = Field(description="Instrument and arms, e.g. 'profiler-gpu: essentials + culprit vs …'.")
    phases: list[PhaseDelta] = Field(default_factory=list)
