"""One phase's per-cycle time from its samples: median with a bootstrap CI (the models layer holds only the shape)."""

from __future__ import annotations

import statistics

from specdoctor.models.phases import PhaseStat
from specdoctor.stats.summary import median_ci

__all__ = ["phase_stat"]


def phase_stat(samples: list[float], source: str, cpu: list[float] | None = None) -> PhaseStat | None:
    if not samples:
        return None
    ci = median_ci(samples) if len(samples) > 1 else None
    return PhaseStat(ms=round(statistics.median(samples), 4), samples=[round(s, 4) for s in samples],
                     ci=None if ci is None else (round(ci[0], 4), round(ci[1], 4)), source=source,
                     cpu_ms=round(statistics.median(cpu), 4) if cpu else None)
