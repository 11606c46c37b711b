"""Launches bisect_commits' search uses over N upstream commits, one culprit, against a noisy simulated server.

A lighter harness than the twin (honestly: the search itself, not the whole investigation): each launch at commit i
draws run samples at 60 tok/s / (1 + the culprit's effect when i >= culprit), lognormal run-to-run noise (2 %), and
the probe buys more runs while the midpoint test is undecided, exactly as `bisect_commits` drives
`stats.history_search.search_history`. `launches` counts every launch of the search: the two references (the good
commit and HEAD, each with the essentials) and every probe; the both-ways confirmation reuses the culprit's and its
parent's probes. Goal: ⌈log2 N⌉ + 2. The skip rows make a share of the commits untestable (the essentials conflict
or the server does not start); a culprit whose parent is untestable can only be reported as a range, never named.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from pydantic import BaseModel

from specdoctor.stats.history_search import Probe, SideJudge, launch_bound, search_history

__all__ = ["UpstreamRow", "run_upstream", "upstream_table", "main"]

BASE_TPS, NOISE_CV, CAP = 60.0, 0.02, 20


def _probe(n: int, culprit: int, effect: float, untestable: set[int], rng: random.Random):
    def probe(i: int, purpose: str, judge: SideJudge | None, runs: int) -> Probe:
        if i in untestable:
            return Probe(outcome="skip", cause="untestable")
        tps = BASE_TPS / (1 + (effect if i >= culprit else 0.0))
        xs: list[float] = []
        want = runs
        while True:
            xs += [tps * math.exp(rng.gauss(0, NOISE_CV)) for _ in range(want - len(xs))]
            verdict = judge(xs) if judge else "measured"
            if verdict is not None:
                return Probe(outcome=verdict, samples=xs)  # type: ignore[arg-type]
            if len(xs) >= CAP:
                return Probe(outcome="unresolved", samples=xs, cause="undecided")
            want = min(2 * len(xs), CAP)

    return probe


class UpstreamRow(BaseModel):
    """One table row: N commits, one culprit, `skip_pct` % of the others untestable."""

    commits: int
    skip_pct: int
    seeds: int
    mean: float
    max: int
    goal: int
    named_right: float
    range_only: float
    wrong: int


def run_upstream(n: int, seeds: int, skip_pct: int = 0, effect: float = 0.15) -> UpstreamRow:
    """Launches and rightness over `seeds` random culprit positions (and random untestable commits)."""
    counts, right, ranged, wrong = [], 0, 0, 0
    for seed in range(seeds):
        rng = random.Random(seed * 7919 + n * 31 + skip_pct)
        culprit = rng.randrange(1, n + 1)
        others = [i for i in range(1, n) if i != culprit]
        untestable = set(rng.sample(others, round(len(others) * skip_pct / 100)))
        res = search_history(n, _probe(n, culprit, effect, untestable, rng))
        counts.append(res.launches)
        named = [c.index for c in res.culprits]
        right += named == [culprit]
        ranged += not named and any(a < culprit <= b for a, b in res.ranges)
        wrong += sum(1 for i in named if i != culprit)
    return UpstreamRow(commits=n, skip_pct=skip_pct, seeds=seeds, mean=statistics.mean(counts), max=max(counts),
                       goal=launch_bound(n), named_right=right / seeds, range_only=ranged / seeds, wrong=wrong)


def upstream_table(rows: list[UpstreamRow]) -> str:
    """The rows as a fixed-width text table."""
    head = (f"{'upstream commits':<16} {'N':>4} {'skip':>5} {'seeds':>5} {'mean':>6} {'max':>4} {'goal':>5} "
            f"{'named right':>11} {'range only':>10} {'wrong':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{'one culprit':<16} {r.commits:>4} {r.skip_pct:>4}% {r.seeds:>5} {r.mean:>6.2f} {r.max:>4} "
                     f"{r.goal:>5} {100 * r.named_right:>10.0f}% {100 * r.range_only:>9.0f}% {r.wrong:>5}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    ns = parser.parse_args(argv)
    rows = [run_upstream(n, ns.seeds) for n in (16, 64, 256)] + [run_upstream(64, ns.seeds, skip_pct=10)]
    print(upstream_table(rows))  # noqa: T201 - a benchmark script's output is its table


if __name__ == "__main__":
    main()
