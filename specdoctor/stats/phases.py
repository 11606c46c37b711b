"""Phase statistics: one phase's per-cycle samples as a PhaseStat, and a cause's phase effect from two profiled arms."""

from __future__ import annotations

import statistics
from typing import Literal

from specdoctor.models.phases import PhaseDelta, PhaseEffect, PhaseName, PhaseStat, PhaseTimes
from specdoctor.stats.summary import diff_of_medians_ci, median_ci

__all__ = ["CYCLE_PCT", "HOST_DOMINANCE", "MATERIAL_PCT", "ADDS_UP", "phase_stat", "phase_deltas", "phase_effect",
           "cycle_growth", "cycle_account_line"]

MATERIAL_PCT = 5.0
"""A phase moved only when its delta's CI excludes zero and the delta is at least this % of the fast arm's time."""


def phase_stat(samples: list[float], source: str, cpu: list[float] | None = None,
               host: list[float] | None = None) -> PhaseStat | None:
    if not samples:
        return None
    ci = median_ci(samples) if len(samples) > 1 else None
    return PhaseStat(ms=round(statistics.median(samples), 4), samples=[round(s, 4) for s in samples],
                     ci=None if ci is None else (round(ci[0], 4), round(ci[1], 4)), source=source,
                     cpu_ms=round(statistics.median(cpu), 4) if cpu else None,
                     host_samples=[round(h, 4) for h in host or []])


Basis = Literal["gpu", "host"]


def _on(s: PhaseStat | None, basis: Basis) -> PhaseStat | None:
    """The stat as read on `basis`: its own samples, or its ranges' host-only time (None when it has none)."""
    if s is None or basis == "gpu":
        return s
    if not s.host_samples:
        return None
    return PhaseStat(ms=statistics.median(s.host_samples), samples=s.host_samples, source=s.source)


def _delta(phase: PhaseName, slow: PhaseStat | None, fast: PhaseStat | None, per: Literal["step", "cycle"],
           basis: Basis = "gpu") -> PhaseDelta | None:
    slow, fast = _on(slow, basis), _on(fast, basis)
    if slow is None or fast is None or len(slow.samples) < 2 or len(fast.samples) < 2:
        return None
    lo, hi = diff_of_medians_ci(fast.samples, slow.samples)
    d = statistics.median(slow.samples) - statistics.median(fast.samples)
    moved = (lo > 0 or hi < 0) and abs(d) >= MATERIAL_PCT / 100 * max(abs(fast.ms), 1e-9)
    return PhaseDelta(phase=phase, per=per, delta_ms=round(d, 3), ci=(round(lo, 3), round(hi, 3)),
                      slow_ms=slow.ms, fast_ms=fast.ms, moved=moved, basis=basis)


def _measured(s: PhaseStat | None) -> PhaseStat | None:
    """A plain-decode step from the trace (a plain server's `step[DECODE]`), never one derived from tok/s."""
    return s if s is not None and not s.source.startswith("derived") else None


def phase_deltas(slow: PhaseTimes, fast: PhaseTimes, basis: Basis = "gpu") -> list[PhaseDelta]:
    """Every phase both arms measured: slow minus fast, with its CI and whether it moved (`basis` 'host': each
    range's host time — the gap before it plus the time it stays open after its GPU work — instead of its GPU time)."""
    per: Literal["step", "cycle"] = "step" if slow.draft_ms and fast.draft_ms else "cycle"
    pairs: list[tuple[PhaseName, PhaseStat | None, PhaseStat | None, Literal["step", "cycle"]]] = [
        ("draft", slow.draft_ms or slow.draft_cycle_ms, fast.draft_ms or fast.draft_cycle_ms, per),
        ("verify", slow.verify_ms, fast.verify_ms, "cycle"),
        ("draft_extend", slow.draft_extend_ms, fast.draft_extend_ms, "cycle"),
        ("sample", slow.sample_ms, fast.sample_ms, "cycle"),
        ("decode", _measured(slow.decode_ms), _measured(fast.decode_ms), "step")]
    return [d for d in (_delta(*p, basis=basis) for p in pairs) if d is not None]


HOST_DOMINANCE = 2.0
"""The host basis is read over a GPU phase that moved only when the host moved this many times more (CI-wise): a GPU
slowdown of X makes the host wait at most about X, so a host move well beyond every GPU move is the host's own."""


def _per_cycle(d: PhaseDelta, steps: int) -> int:
    """How many times a delta counts per cycle (a draft step counts k times)."""
    return steps if d.phase == "draft" and d.per == "step" else 1


CYCLE_PCT = 1.0
"""A phase is named only when its growth per cycle is at least this % of the fast arm's cycle: a range that was
almost empty can triple (a draft step's host time 0.003 → 0.010 ms on the twin, when fewer draft steps were the
cause) without explaining any slowdown (0.1 % of that cycle)."""


def _cycle_ms(t: PhaseTimes, steps: int) -> float | None:
    """The fast arm's cycle on the GPU (draft + verify + draft-extend), as measured or summed from its phases."""
    if t.cycle_ms is not None:
        return t.cycle_ms.ms
    draft = t.draft_cycle_ms.ms if t.draft_cycle_ms else (t.draft_ms.ms * steps if t.draft_ms else None)
    parts = [draft, t.verify_ms.ms if t.verify_ms else None, t.draft_extend_ms.ms if t.draft_extend_ms else None,
             t.sample_ms.ms if t.sample_ms else None]
    return sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None


def _largest_growth(deltas: list[PhaseDelta], steps: int, floor_ms: float = 0.0) -> PhaseDelta | None:
    """The phase that grew most per cycle (moved, longer in the slow arm, by at least `floor_ms` a cycle)."""
    return max((d for d in deltas if d.moved and d.delta_ms > 0 and d.delta_ms * _per_cycle(d, steps) >= floor_ms),
               key=lambda d: d.delta_ms * _per_cycle(d, steps), default=None)


ADDS_UP = 0.5
"""A phase is named only when its growth per cycle is at least this fraction of the cycle's own growth (the wall
per cycle in the trace): a GPU phase that moved +0.7 ms while the cycle grew +3.7 ms cannot be why it grew."""


def cycle_growth(slow: PhaseTimes, fast: PhaseTimes) -> PhaseDelta | None:
    """The wall per cycle (trace), slow minus fast, with its CI; None when either arm has no wall."""
    return _delta("draft", slow.wall_ms, fast.wall_ms, "cycle")  # the phase name is a placeholder: the whole cycle


def _cycle_phases(slow: PhaseTimes, fast: PhaseTimes) -> list[PhaseName]:
    """The phases a cycle line shows: the engine's (recorded with the times), else — a record from before engines
    said — draft, verify, draft-extend and sample where either arm timed it."""
    said = slow.phases or fast.phases
    if said:
        return [p for p in said if p != "decode"]
    sample: list[PhaseName] = ["sample"] if slow.sample_ms or fast.sample_ms else []
    return ["draft", "verify", "draft_extend", *sample]


def _cycle_part(t: PhaseTimes, phase: PhaseName) -> PhaseStat | None:
    return {"draft": t.draft_cycle_ms, "verify": t.verify_ms, "draft_extend": t.draft_extend_ms,
            "sample": t.sample_ms}.get(phase)


def cycle_account_line(slow: PhaseTimes, fast: PhaseTimes) -> str | None:
    """'cycle +3.70 ms [3.5, 3.9]: draft +3.02 (GPU +0.01, idle before +3.01), verify +0.02, draft-extend +0.70,
    rest -0.05, unaccounted +0.00' — where the cycle's growth went, the parts adding up to the wall by construction;
    'unaccounted' is the measured cycle's growth (τ / tok/s) the trace's wall does not show. Only the engine's
    phases are parts (vLLM has no draft-extend). None: no walls."""
    g = cycle_growth(slow, fast)
    if g is None:
        return None
    parts = []
    for ph in _cycle_phases(slow, fast):
        gs, gf = _cycle_part(slow, ph), _cycle_part(fast, ph)
        i_s, i_f = slow.idle_before_ms.get(ph), fast.idle_before_ms.get(ph)
        gpu = gs.ms - gf.ms if gs is not None and gf is not None else 0.0
        idle = i_s.ms - i_f.ms if i_s is not None and i_f is not None else 0.0
        parts.append(f"{ph.replace('_', '-')} {gpu + idle:+.2f} (GPU {gpu:+.2f}, idle before {idle:+.2f})")
    rest = slow.rest_ms.ms - fast.rest_ms.ms if slow.rest_ms and fast.rest_ms else 0.0
    out = f"cycle {g.delta_ms:+.2f} ms [{g.ci[0]:.2f}, {g.ci[1]:.2f}]: " + ", ".join(parts) + f", rest {rest:+.2f}"
    if slow.measured_cycle_ms is not None and fast.measured_cycle_ms is not None:
        measured = slow.measured_cycle_ms - fast.measured_cycle_ms
        out += f"; measured cycle (τ / tok/s) {measured:+.2f} ms, {measured - g.delta_ms:+.2f} ms outside the trace"
    return out


def _adds_up(top: PhaseDelta, slow: PhaseTimes, fast: PhaseTimes, steps: int) -> bool:
    """The named phase's growth carries at least ADDS_UP of the cycle's growth (or the cycle did not grow)."""
    g = cycle_growth(slow, fast)
    if g is None or not (g.ci[0] > 0) or g.delta_ms <= 0:
        return True
    return top.delta_ms * _per_cycle(top, steps) >= ADDS_UP * g.delta_ms


def phase_effect(slow: PhaseTimes | None, fast: PhaseTimes | None, arms: str = "") -> PhaseEffect | None:
    """The phase a cause touches, from the phase times of the slow and the fast arm of its confirming comparison:
    of the phases that moved longer in the slow arm (CI excludes 0, material), the one with the largest change per
    cycle (a draft step counts k times). A phase that got shorter cannot explain a slowdown: it is a side effect (or
    another launch's drift), kept in `phases` but never named. None when neither arm was profiled, or when no phase
    moved longer (no phase effect is claimed), or when the largest growth is under CYCLE_PCT % of the fast cycle.

    GPU time first; the host time of the ranges (the gap before each, and how long it stays open after its GPU work)
    when no phase's GPU time grew, or when the host grew more than HOST_DOMINANCE times the largest GPU move
    (CI bounds). A host stall leaves the GPU idle, and the GPU's other phases then move a little too: on the real
    H100, a sync + 4 ms sleep before verify's range read +4.6 ms of host time before verify and +0.5 ms of GPU time
    in draft-extend (clocks and caches cool while the GPU idles); on the real H200, the same patch moved no GPU time.
    A GPU slowdown also moves the host time of whichever range waits for it, by about as much: the GPU phase stays
    the one named. A range's whole CPU duration would also count the GPU wait a new sync moves into it."""
    if slow is None or fast is None:
        return None
    steps = slow.steps or fast.steps or 1
    cycle = _cycle_ms(fast, fast.steps or steps)
    floor = CYCLE_PCT / 100 * cycle if cycle else 0.0
    deltas = phase_deltas(slow, fast)
    source = slow.source if slow.source == fast.source else f"{slow.source} / {fast.source}"
    top = gpu = _largest_growth(deltas, steps, floor)
    if slow.source == fast.source == "profiler-gpu":
        host_deltas = phase_deltas(slow, fast, "host")
        deltas = deltas + host_deltas
        host = _largest_growth(host_deltas, steps, floor)
        if host is not None and (gpu is None or host.ci[0] * _per_cycle(host, steps) >
                                 HOST_DOMINANCE * gpu.ci[1] * _per_cycle(gpu, steps)):
            top = host
            source += (" (host time around each range's GPU work: no phase's GPU time grew)" if gpu is None else
                       f" (host time around each range's GPU work: it moved over {HOST_DOMINANCE:g}x the largest GPU "
                       f"move, {gpu.phase.replace('_', '-')} {gpu.delta_ms:+.2f} ms)")
    if top is None or not _adds_up(top, slow, fast, steps):
        return None  # no phase, or one that cannot carry the cycle's growth: none named (cycle_account_line says)
    return PhaseEffect(**top.model_dump(), source=source + (f": {arms}" if arms else ""), phases=deltas)
