"""Server launches used by bisect_patches' search vs one-at-a-time, over random culprits and a noisy simulated server."""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable

from pydantic import BaseModel

from specdoctor.stats.ddmin import CachedOracle, Outcome, classify, isolate

__all__ = ["Row", "noisy_oracle", "run_case", "table", "main"]

FAST, SLOW, NOISE = 82.0, 60.0, 2.0


def noisy_oracle(guilty: Callable[[frozenset[int]], bool], rng: random.Random, runs: int = 5,
                 cap: int = 15) -> Callable[[frozenset[int]], Outcome]:
    """A simulated server: slow when `guilty(subset)`; outcome by the comparator vs the slow reference."""
    ref: list[float] = []
    fast: list[float] = []

    def draw(slow: bool, n: int) -> list[float]:
        return [rng.gauss(SLOW if slow else FAST, NOISE) for _ in range(n)]

    def test(subset: frozenset[int]) -> Outcome:
        slow = guilty(subset)
        if not ref:  # the first launch is the slow reference (essentials + all patches)
            ref.extend(draw(slow, runs))
            return "regressed" if slow else "same"
        samples = draw(slow, runs)
        while True:
            verdict = classify(samples, ref, fast or None, magnitude=0.1 * statistics.median(ref))
            if verdict is not None:
                if verdict == "same" and not fast:
                    fast.extend(samples)  # the first fast trial becomes the fast reference
                return verdict
            if len(samples) >= cap:
                return "unresolved"
            samples += draw(slow, runs)

    return test


class Row(BaseModel):
    """One table row."""

    case: str
    patches: int
    seeds: int
    mean: float
    max: int
    correct: float
    goal: int
    naive: int


def run_case(p: int, culprits: int, seeds: int) -> Row:
    """Mean/max launches and correctness over `seeds` random culprit positions."""
    used: list[int] = []
    right = 0
    for seed in range(seeds):
        rng = random.Random(seed * 1000 + p * 10 + culprits)
        truth = frozenset(rng.sample(range(p), culprits))
        oracle = CachedOracle(noisy_oracle(truth.issubset, rng))
        res = isolate(list(range(p)), oracle)
        used.append(res.tests)
        right += {int(c) for c in res.culprits} == set(truth)
    goal = math.ceil(math.log2(p)) + 2
    return Row(case="single culprit" if culprits == 1 else f"{culprits} interacting", patches=p, seeds=seeds,
               mean=statistics.mean(used), max=max(used), correct=right / seeds, goal=goal, naive=p + 1)


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table."""
    head = f"{'case':<16} {'P':>3} {'seeds':>5} {'mean':>6} {'max':>4} {'goal':>5} {'one-at-a-time':>14} {'correct':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        goal = str(r.goal) if r.case == "single culprit" else "-"
        naive = str(r.naive) if r.case == "single culprit" else f"{r.naive} (misses)"
        lines.append(f"{r.case:<16} {r.patches:>3} {r.seeds:>5} {r.mean:>6.2f} {r.max:>4} {goal:>5} "
                     f"{naive:>14} {100 * r.correct:>7.0f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    ns = parser.parse_args(argv)
    rows = [run_case(p, k, ns.seeds) for k in (1, 2) for p in (4, 8, 16, 32)]
    print(table(rows))  # noqa: T201 - a benchmark script's output is its table


if __name__ == "__main__":
    main()
