"""A fresh server's first measured runs that were still warming up: a leading group slower than every later run.

Seen on the real engine (SGLang 0.5.17, a baseline server launched a moment before): after the one warm-up run the
first runs were 284, 285 tok/s and the rest 457, 708, 670 (H100); 429 then 517, 630, 629, 617 (H200). Such runs are
not the server's speed (JIT compiles and caches of shapes the warm-up did not reach) and move the median by a third.
A leading group is called warming only when even its fastest run is clearly below the slowest later run and far
below their median for their own spread (median - 4 robust SDs); at least `keep` runs must follow. Independent runs
are called warming 0 % of the time at the twin's 2.5 % spread, ~1 % at 10 %, ~4 % at the noisiest real spread seen
(22 %), and a false call costs only the runs it replaces (tests/server/test_benchmark_warming_up.py)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["warming_prefix", "WARMING_MARGIN", "WARMING_Z"]

WARMING_MARGIN = 0.15
"""How far the leading group's fastest run must be below the slowest later run (fraction of the latter)."""
WARMING_Z = 4.0
"""...and how many robust SDs (1.4826 x MAD) of the later runs below their median."""


def warming_prefix(samples: Sequence[float], margin: float = WARMING_MARGIN, z: float = WARMING_Z,
                   keep: int = 3) -> int:
    """How many leading runs were still warming up (0: none): the longest prefix, leaving at least `keep` runs,
    whose fastest run is below (1 - margin) x the slowest run after it and below the later runs' median less `z`
    robust SDs of theirs."""
    best = 0
    for k in range(1, len(samples) - keep + 1):
        rest = samples[k:]
        med = statistics.median(rest)
        sd = 1.4826 * statistics.median([abs(x - med) for x in rest])
        if max(samples[:k]) < min((1 - margin) * min(rest), med - z * sd):
            best = k
    return best
