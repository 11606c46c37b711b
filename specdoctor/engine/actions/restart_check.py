"""The user's server after its restart, judged like every other measurement: identity first, then throughput.

Identity is what the server is (argv, cwd, full environment and user by hash; the GPU memory it holds; its port);
throughput is measured after the benchmark's own warm-up handling (a fresh server's leading slow runs replaced,
`stats.warmup`) with the sequential comparator against the runs taken before stopping it. A freshly started real
server runs slower for a while (SGLang 0.5.17 on an H100: 442 -> 292 tok/s right after a restart of an identical
server, 355 -> 307 before), so a slower first look is re-measured, and "NOT left as found" needs a decided
difference that survives the re-measurement.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.stats.comparator import Comparison, GrowingArm

__all__ = ["SAME_WITHIN", "GPU_MIB_WITHIN", "ThroughputAfter", "judge_throughput", "identity_differences",
           "as_found"]

SAME_WITHIN = 0.10
"""The change the project sizes its comparisons for (10 % at CV 3 %): a smaller one is the server as it was."""
GPU_MIB_WITHIN = 0.05
"""GPU memory held within 5 % (or 1 GiB) is the same server: its KV pool is sized from the same fraction."""

Outcome = Literal["SAME", "DIFFERENT", "UNKNOWN"]


class ThroughputAfter(BaseModel):
    """The throughput half of the box check: the outcome, the runs it was decided on and why."""

    outcome: Outcome
    samples: list[float] = Field(default_factory=list, description="The runs the outcome was decided on.")
    replaced: list[float] = Field(default_factory=list, description="A first look found slower and re-measured "
                                  "(the fresh server still warming up, when the re-measurement reads the same).")
    comparison: Comparison | None = None
    reason: str = ""


def as_found(c: Comparison) -> Outcome:
    """SAME also when the comparator tells the two apart by less than SAME_WITHIN either way: a fresh launch of the
    same server differs by a few percent (memory layout, clocks), which is the server as it was."""
    if c.outcome == "DIFFERENT" and abs(c.pct_change) < 100 * SAME_WITHIN:
        return "SAME"
    return c.outcome


def _look(before: Sequence[float], runs: int, measure: Callable[[int], list[float] | None]
          ) -> tuple[list[float], Comparison | None]:
    """One look at the restarted server, grown with the sequential comparator (the before runs fixed, its alpha
    spent over the looks) while it says UNKNOWN: the runs and the last comparison (None: the benchmark failed)."""
    arm = GrowingArm(before, start=runs, step=runs, cap=2 * runs, magnitude=SAME_WITHIN * statistics.median(before))
    got = measure(runs)
    if got is None:
        return [], None
    samples = list(got)
    while (more := arm.more(samples)) > 0:
        extra = measure(more)
        if extra is None:
            break
        samples += extra
    return samples, Comparison.model_validate(arm.final(samples))


def judge_throughput(before: Sequence[float], runs: int, measure: Callable[[int], list[float] | None]
                     ) -> ThroughputAfter:
    """Decide SAME / DIFFERENT / UNKNOWN for the restarted server. `measure(n)` benchmarks n runs on it (with the
    benchmark's warm-up handling) and returns their tok/s, or None when it failed. A slower first look is measured
    again on its own (the server has warmed meanwhile); DIFFERENT only when both looks decide the same slowdown."""
    before = [float(x) for x in before]
    if len(before) < 3:
        return ThroughputAfter(outcome="UNKNOWN", reason=f"only {len(before)} run(s) before stopping it: need 3")
    first, c1 = _look(before, runs, measure)
    if c1 is None:
        return ThroughputAfter(outcome="UNKNOWN", reason="the benchmark after the restart failed")
    o1 = as_found(c1)
    if o1 != "DIFFERENT" or c1.pct_change > 0:  # SAME, undecided, or faster (nothing of ours makes it faster)
        why = c1.reason if o1 != "UNKNOWN" else f"undecided after {len(first)} runs: {c1.reason}"
        return ThroughputAfter(outcome=o1, samples=first, comparison=c1, reason=why)
    second, c2 = _look(before, runs, measure)
    if c2 is None:
        return ThroughputAfter(outcome="UNKNOWN", samples=first, comparison=c1, reason=(
            f"the first look was {c1.pct_change:+.1f} % and the re-measurement failed"))
    o2 = as_found(c2)
    slower = f"the first look after the restart read {c1.median_b:.1f} tok/s ({c1.pct_change:+.1f} %)"
    if o2 == "DIFFERENT" and c2.pct_change < 0:
        return ThroughputAfter(outcome="DIFFERENT", samples=second, replaced=first, comparison=c2, reason=(
            f"{slower} and the re-measurement {c2.median_b:.1f} ({c2.pct_change:+.1f} %): a slowdown that "
            "survives a re-measurement"))
    if o2 == "UNKNOWN":
        return ThroughputAfter(outcome="UNKNOWN", samples=second, replaced=first, comparison=c2, reason=(
            f"{slower}; the re-measurement ({c2.median_b:.1f} tok/s) is undecided: {c2.reason}"))
    return ThroughputAfter(outcome=o2, samples=second, replaced=first, comparison=c2, reason=(
        f"{slower}, the fresh server still warming up; re-measured {c2.median_b:.1f} tok/s ({c2.pct_change:+.1f} %): "
        f"{c2.reason}"))


def identity_differences(*, identity: tuple[str | None, str | None], port: tuple[int | None, int | None],
                         gpu_mib: tuple[int | None, int | None]) -> list[str]:
    """What differs between the server as found and as restarted (empty: the same server). Each pair is
    (before, after); a side not read (None) is no difference, it is said elsewhere."""
    out: list[str] = []
    if identity[0] and identity[1] and identity[0] != identity[1]:
        out.append(f"argv/cwd/environment/user hash {identity[0][:12]} → {identity[1][:12]}")
    if port[0] and port[1] and port[0] != port[1]:
        out.append(f"port :{port[0]} → :{port[1]}")
    if gpu_mib[0] and gpu_mib[1] is not None:
        tol = max(GPU_MIB_WITHIN * gpu_mib[0], 1024)
        if abs(gpu_mib[1] - gpu_mib[0]) > tol:
            out.append(f"GPU memory held {gpu_mib[0]} → {gpu_mib[1]} MiB")
    return out
