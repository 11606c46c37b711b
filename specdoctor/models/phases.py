"""Per-cycle phase times of a speculative server (draft, verify, draft-extend, plain decode) and their source."""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.stats.summary import diff_of_medians_ci, median_ci

__all__ = ["PhaseSource", "PhaseStat", "PhaseTimes", "ProfilerOverhead", "phase_stat", "PhaseDelta", "PhaseEffect",
           "phase_deltas", "phase_effect"]

PhaseSource = Literal["profiler-gpu", "profiler-cpu", "derived"]


class PhaseStat(BaseModel):
    """One phase's time per cycle: the median of its samples with a 95 % bootstrap CI, and where it came from."""

    ms: float
    samples: list[float] = Field(default_factory=list)
    ci: tuple[float, float] | None = None
    source: str = Field(description="e.g. 'profiler trace, GPU time of step[TARGET_VERIFY …]' or 'derived: …'.")
    cpu_ms: float | None = Field(default=None, description="Median CPU (launch) time of the same ranges.")


def phase_stat(samples: list[float], source: str, cpu: list[float] | None = None) -> PhaseStat | None:
    if not samples:
        return None
    ci = median_ci(samples) if len(samples) > 1 else None
    return PhaseStat(ms=round(statistics.median(samples), 4), samples=[round(s, 4) for s in samples],
                     ci=None if ci is None else (round(ci[0], 4), round(ci[1], 4)), source=source,
                     cpu_ms=round(statistics.median(cpu), 4) if cpu else None)


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
    draft_ms: PhaseStat | None = Field(default=None, description="One draft step (the draft range / k).")
    draft_cycle_ms: PhaseStat | None = Field(default=None, description="All k draft steps of a cycle.")
    verify_ms: PhaseStat | None = None
    draft_extend_ms: PhaseStat | None = None
    decode_ms: PhaseStat | None = Field(default=None, description="One plain decode step.")
    cycle_ms: PhaseStat | None = Field(default=None, description="Draft + verify + draft-extend, per cycle.")
    steps: int | None = Field(default=None, description="Draft steps k per cycle (the server's launch line).")
    cycles: int = 0
    trace_path: str | None = None
    overhead: ProfilerOverhead | None = None
    notes: list[str] = Field(default_factory=list)

    def summary_line(self) -> str:
        parts = [f"{n} {s.ms:.2f} ms" for n, s in (("draft/step", self.draft_ms), ("verify", self.verify_ms),
                                                   ("draft-extend", self.draft_extend_ms), ("decode", self.decode_ms))
                 if s is not None]
        over = f"; profiler overhead {self.overhead.pct:.1f} %" if self.overhead else ""
        return f"{self.source}: " + ", ".join(parts) + f" ({self.cycles} cycles){over}"


PhaseName = Literal["draft", "verify", "draft_extend", "decode"]

MATERIAL_PCT = 5.0
"""A phase moved only when its delta's CI excludes zero and the delta is at least this % of the fast arm's time."""


class PhaseDelta(BaseModel):
    """One phase, slow arm minus fast arm (ms; a draft or plain-decode step per step, the others per cycle), with a
    bootstrap CI."""

    phase: PhaseName
    per: Literal["step", "cycle"] = "cycle"
    delta_ms: float
    ci: tuple[float, float]
    slow_ms: float
    fast_ms: float
    moved: bool = Field(description="CI excludes 0 and |delta| >= MATERIAL_PCT % of the fast arm's time.")

    def line(self) -> str:
        name = self.phase.replace("_", "-")
        return f"{name} {self.delta_ms:+.1f} ms [{self.ci[0]:.1f}, {self.ci[1]:.1f}] per {self.per}"


class PhaseEffect(PhaseDelta):
    """A confirmed cause's effect on the phase it touches: the moved phase with the largest change per cycle,
    measured by profiling both arms of the comparison that confirmed it; `phases` keeps every phase's delta."""

    source: str = Field(description="Instrument and arms, e.g. 'profiler-gpu: essentials + culprit vs …'.")
    phases: list[PhaseDelta] = Field(default_factory=list)


def _delta(phase: PhaseName, slow: PhaseStat | None, fast: PhaseStat | None, per: Literal["step", "cycle"]
           ) -> PhaseDelta | None:
    if slow is None or fast is None or len(slow.samples) < 2 or len(fast.samples) < 2:
        return None
    lo, hi = diff_of_medians_ci(fast.samples, slow.samples)
    d = statistics.median(slow.samples) - statistics.median(fast.samples)
    moved = (lo > 0 or hi < 0) and abs(d) >= MATERIAL_PCT / 100 * max(abs(fast.ms), 1e-9)
    return PhaseDelta(phase=phase, per=per, delta_ms=round(d, 3), ci=(round(lo, 3), round(hi, 3)),
                      slow_ms=slow.ms, fast_ms=fast.ms, moved=moved)


def _measured(s: PhaseStat | None) -> PhaseStat | None:
    """A plain-decode step from the trace (a plain server's `step[DECODE]`), never one derived from tok/s."""
    return s if s is not None and not s.source.startswith("derived") else None


def phase_deltas(slow: PhaseTimes, fast: PhaseTimes) -> list[PhaseDelta]:
    """Every phase both arms measured: slow minus fast, with its CI and whether it moved."""
    per: Literal["step", "cycle"] = "step" if slow.draft_ms and fast.draft_ms else "cycle"
    pairs: list[tuple[PhaseName, PhaseStat | None, PhaseStat | None, Literal["step", "cycle"]]] = [
        ("draft", slow.draft_ms or slow.draft_cycle_ms, fast.draft_ms or fast.draft_cycle_ms, per),
        ("verify", slow.verify_ms, fast.verify_ms, "cycle"),
        ("draft_extend", slow.draft_extend_ms, fast.draft_extend_ms, "cycle"),
        ("decode", _measured(slow.decode_ms), _measured(fast.decode_ms), "step")]
    return [d for d in (_delta(*p) for p in pairs) if d is not None]


def phase_effect(slow: PhaseTimes | None, fast: PhaseTimes | None, arms: str = "") -> PhaseEffect | None:
    """The phase a cause touches, from the phase times of the slow and the fast arm of its confirming comparison:
    of the phases that moved (CI excludes 0, material), the one with the largest change per cycle (a draft step
    counts k times). None when neither arm was profiled, or when no phase moved (no phase effect is claimed)."""
    if slow is None or fast is None:
        return None
    steps = slow.steps or fast.steps or 1
    deltas = phase_deltas(slow, fast)
    moved = [d for d in deltas if d.moved]
    if not moved:
        return None
    top = max(moved, key=lambda d: abs(d.delta_ms) * (steps if d.phase == "draft" and d.per == "step" else 1))
    source = slow.source if slow.source == fast.source else f"{slow.source} / {fast.source}"
    return PhaseEffect(**top.model_dump(), source=source + (f": {arms}" if arms else ""), phases=deltas)
