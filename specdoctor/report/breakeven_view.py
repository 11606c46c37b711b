"""What the report draws from a `BreakevenAnalysis`: the per-k curves of tok/s against τ."""

from __future__ import annotations

from specdoctor.models import BreakevenAnalysis

__all__ = ["curve_points", "spec_tps"]


def spec_tps(tau: float, cycle_ms: float) -> float:
    """Speculative tok/s: τ tokens per cycle (k drafts + one verify + overhead)."""
    return 1000.0 * tau / cycle_ms


def curve_points(b: BreakevenAnalysis, ks: range = range(1, 6), n: int = 41) -> dict[int, list[tuple[float, float]]]:
    """Per-k (τ, tok/s) from τ = 1 to k+1, using the tool's per-k cycle time (its verify model included)."""
    cycles = {p.steps: p.cycle_ms for p in b.predictions}
    out: dict[int, list[tuple[float, float]]] = {}
    for k in ks:
        cycle = cycles.get(k)
        if cycle is None and b.verify_ms is not None:
            cycle = k * (b.draft_ms or 0.0) + b.verify_ms + b.overhead_ms
        if cycle is None or cycle <= 0:
            continue
        taus = [1.0 + k * i / (n - 1) for i in range(n)]
        out[k] = [(t, spec_tps(t, cycle)) for t in taus]
    return out
