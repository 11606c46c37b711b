"""Server launches used by bisect_patches' search vs one-at-a-time, over random culprits and a noisy simulated server.

Two counts per case. `search`: the search as the investigation runs it — its slow and fast references are the
subtraction's two arms (all patches, essentials only), measured before it and handed over (`reference_slow`,
`reference_fast`), so only the bisection's own trials and its both-ways confirmation are launches; the goal
⌈log2 P⌉ + 2 is for this count. `alone`: bisect_patches called without references (a user's direct call), which
measures the slow reference itself (one more launch) and takes its first fast trial as the fast one.

`--launch-sd X`: each launch (a trial, a reference) reads its configuration's mean plus one offset drawn per launch
(sd X tok/s), shared by every run on that server, as real servers read a few % apart from one start to the next;
0 (the default) draws none, so the table is the one without.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from specdoctor.stats.ddmin import CachedOracle, Outcome, classify, isolate

__all__ = ["Row", "noisy_oracle", "run_case", "table", "main", "EffectRow", "effect_case", "effect_table", "wired_case"]

FAST, SLOW, NOISE = 82.0, 60.0, 2.0


def launch_offset(rng: random.Random, sd: float) -> float:
    """One launch's offset from its configuration's mean, shared by all of that server's runs: runs within one
    launch spread less than launches do, so a search that trusts the runs' spread alone overstates its precision.
    Drawn only when sd > 0, so that without it the random stream (and the table) is as before."""
    return rng.gauss(0.0, sd) if sd > 0 else 0.0


def noisy_oracle(guilty: Callable[[frozenset[int]], bool], rng: random.Random, runs: int = 5, cap: int = 15,
                 refs_given: bool = False, launch_sd: float = 0.0) -> Callable[[frozenset[int]], Outcome]:
    """A simulated server: slow when `guilty(subset)`; outcome by the comparator vs the slow reference (and the
    fast one once known). `refs_given`: both references were measured before the search (the subtraction), each
    its own launch. Each `test` call is a launch: its runs, the first five and any more, share one offset."""

    def draw(slow: bool, n: int, off: float) -> list[float]:
        return [rng.gauss((SLOW if slow else FAST) + off, NOISE) for _ in range(n)]

    ref: list[float] = draw(True, runs, launch_offset(rng, launch_sd)) if refs_given else []
    fast: list[float] = draw(False, runs, launch_offset(rng, launch_sd)) if refs_given else []

    def test(subset: frozenset[int]) -> Outcome:
        slow = guilty(subset)
        off = launch_offset(rng, launch_sd)
        if not ref:  # the first launch is the slow reference (essentials + all patches)
            ref.extend(draw(slow, runs, off))
            return "regressed" if slow else "same"
        samples = draw(slow, runs, off)
        while True:
            verdict = classify(samples, ref, fast or None, magnitude=0.1 * statistics.median(ref))
            if verdict is not None:
                if verdict == "same" and not fast:
                    fast.extend(samples)  # the first fast trial becomes the fast reference
                return verdict
            if len(samples) >= cap:
                return "unresolved"
            samples += draw(slow, runs, off)  # more runs on the server already up: the same launch

    return test


class Row(BaseModel):
    """One table row."""

    case: str
    patches: int
    seeds: int
    mean: float
    max: int
    correct: float
    alone_mean: float
    alone_max: int
    alone_correct: float
    goal: int
    naive: int


def _search(p: int, truth: frozenset[int], rng: random.Random, refs_given: bool,
            launch_sd: float = 0.0) -> tuple[int, bool]:
    """Launches and rightness of one search, configured as bisect_patches configures it."""
    oracle = CachedOracle(noisy_oracle(truth.issubset, rng, refs_given=refs_given, launch_sd=launch_sd))
    if refs_given:
        oracle.seed(frozenset(range(p)), "regressed")
        oracle.seed(frozenset(), "same")
    res = isolate(list(range(p)), oracle, confirm=True, replicate=True)
    return res.tests, {int(c) for c in res.culprits} == set(truth)


def run_case(p: int, culprits: int, seeds: int, launch_sd: float = 0.0) -> Row:
    """Mean/max launches and correctness over `seeds` random culprit positions, with and without references."""
    counts: dict[bool, list[int]] = {True: [], False: []}
    right: dict[bool, int] = {True: 0, False: 0}
    for seed in range(seeds):
        for given in (True, False):
            rng = random.Random(seed * 1000 + p * 10 + culprits)
            truth = frozenset(rng.sample(range(p), culprits))
            n, ok = _search(p, truth, rng, given, launch_sd)
            counts[given].append(n)
            right[given] += ok
    goal = math.ceil(math.log2(p)) + 2
    return Row(case="single culprit" if culprits == 1 else f"{culprits} interacting", patches=p, seeds=seeds,
               mean=statistics.mean(counts[True]), max=max(counts[True]), correct=right[True] / seeds,
               alone_mean=statistics.mean(counts[False]), alone_max=max(counts[False]),
               alone_correct=right[False] / seeds, goal=goal, naive=p + 1)


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table."""
    head = (f"{'case':<16} {'P':>3} {'seeds':>5} {'search mean':>11} {'max':>4} {'goal':>5} {'right':>6}   "
            f"{'alone mean':>10} {'max':>4} {'right':>6}   {'one-at-a-time':>14}")
    lines = [head, "-" * len(head)]
    for r in rows:
        goal = str(r.goal) if r.case == "single culprit" else "-"
        naive = str(r.naive) if r.case == "single culprit" else f"{r.naive} (misses)"
        lines.append(f"{r.case:<16} {r.patches:>3} {r.seeds:>5} {r.mean:>11.2f} {r.max:>4} {goal:>5} "
                     f"{100 * r.correct:>5.0f}%   {r.alone_mean:>10.2f} {r.alone_max:>4} {100 * r.alone_correct:>5.0f}%"
                     f"   {naive:>14}")
    return "\n".join(lines)


class EffectRow(BaseModel):
    """Independent culprits found by the effect-size search (stats.effects), each a share of the gap."""

    culprits: int
    patches: int
    seeds: int
    mean: float
    max: int
    goal: int
    found: float
    shares_in_ci: float
    innocent_blamed: int


def effect_case(p: int, k: int, seeds: int, gap: float = FAST - SLOW, launch_sd: float = 0.0) -> EffectRow:
    """k independent culprits with random shares of the gap (additive), among p patches; references given, each
    its own launch; `more` runs share the offset of the launch just made."""
    from specdoctor.stats.effects import search_effects

    launches: list[int] = []
    found = in_ci = innocent = 0
    for seed in range(seeds):
        rng = random.Random(seed * 7919 + p * 31 + k)
        truth = rng.sample(range(p), k)
        weights = [rng.uniform(0.75, 1.25) for _ in truth]  # each at least ~23 % (material: 20 %)
        beta = {c: -gap * w / sum(weights) for c, w in zip(truth, weights, strict=True)}

        up = [0.0]  # the offset of the server launched last, which `more` runs on

        def draw(sub: frozenset[int], n: int, off: float, beta: dict[int, float] = beta,
                 rng: random.Random = rng) -> list[float]:
            return [rng.gauss(FAST + sum(beta.get(i, 0.0) for i in sub) + off, NOISE) for _ in range(n)]

        def launch(sub: frozenset[int], _why: str, up: list[float] = up, rng: random.Random = rng,
                   draw=draw) -> list[float]:
            up[0] = launch_offset(rng, launch_sd)
            return draw(sub, 5, up[0])

        def more(sub: frozenset[int], n: int, up: list[float] = up, draw=draw) -> list[float]:
            return draw(sub, n, up[0])

        slow = draw(frozenset(range(p)), 5, launch_offset(rng, launch_sd))
        fast = draw(frozenset(), 5, launch_offset(rng, launch_sd))
        res = search_effects(list(range(p)), launch, slow=slow, fast=fast, more=more)
        launches.append(res.launches)
        named = {int(c.name) for c in res.culprits}
        found += named == set(truth) and res.confirmed_both_ways
        innocent += len(named - set(truth))
        in_ci += bool(res.culprits) and all(c.share_ci[0] <= beta.get(int(c.name), 0.0) / -gap <= c.share_ci[1]
                                            for c in res.culprits)
    return EffectRow(culprits=k, patches=p, seeds=seeds, mean=statistics.mean(launches), max=max(launches),
                     goal=2 * math.ceil(math.log2(p)) + 2, found=found / seeds, shares_in_ci=in_ci / seeds,
                     innocent_blamed=innocent)


def wired_case(p: int, k: int, seeds: int, gap: float = FAST - SLOW, launch_sd: float = 0.0) -> EffectRow:
    """The same cases through bisect_patches' own first search (tools.bisect_effects.effects_search): each trial a
    launch whose runs grow at the runner's looks (5, 10, 15) until its effect is decided, as `_Runner` measures;
    all of a trial's looks share its launch's offset, and each reference has its own."""
    from types import SimpleNamespace

    from specdoctor.stats.nearer import midpoint_looks
    from specdoctor.tools.checkout.bisect_effects import culprit_effects, effects_search

    launches: list[int] = []
    found = in_ci = innocent = 0
    for seed in range(seeds):
        rng = random.Random(seed * 7919 + p * 31 + k)
        truth = [f"p{i}" for i in rng.sample(range(p), k)]
        weights = [rng.uniform(0.75, 1.25) for _ in truth]
        beta = {c: -gap * w / sum(weights) for c, w in zip(truth, weights, strict=True)}
        made: list[int] = [0]

        def tps(sub: list[str], off: float, rng: random.Random = rng, beta: dict[str, float] = beta) -> float:
            return rng.gauss(FAST + sum(beta.get(i, 0.0) for i in sub) + off, NOISE)

        def run(sub: list[str], _why: str, measure: dict, judge, made: list[int] = made, tps=tps,
                rng: random.Random = rng):
            made[0] += 1
            off = launch_offset(rng, launch_sd)
            rec = SimpleNamespace(samples=[], outcome="unresolved", cause=None)
            for look in midpoint_looks(measure["runs"], measure["max_runs"]):
                rec.samples += [tps(sub, off) for _ in range(look - len(rec.samples))]
                if (verdict := judge(rec.samples) if judge is not None else "measured") is not None:
                    rec.outcome = verdict
                    break
            return rec

        items = [f"p{i}" for i in range(p)]
        slow_off = launch_offset(rng, launch_sd)
        slow = [tps(items, slow_off) for _ in range(5)]
        fast_off = launch_offset(rng, launch_sd)
        res, search, _notes = effects_search(items, run, slow=slow, fast=[tps([], fast_off) for _ in range(5)],
                                             runs=5, max_runs=40,
                                             measure={"requests_per_run": 3, "max_new_tokens": 128})
        launches.append(made[0])
        fitted = culprit_effects(search) if res is not None and search is not None else []
        named = {c.path for c in fitted}
        found += named == set(truth)
        innocent += len(named - set(truth))
        in_ci += bool(fitted) and all(c.share_low <= beta.get(c.path, 0.0) / -gap <= c.share_high for c in fitted)
    return EffectRow(culprits=k, patches=p, seeds=seeds, mean=statistics.mean(launches), max=max(launches),
                     goal=2 * math.ceil(math.log2(p)) + 2, found=found / seeds, shares_in_ci=in_ci / seeds,
                     innocent_blamed=innocent)


def effect_table(rows: list[EffectRow]) -> str:
    head = (f"{'independent culprits':<21} {'P':>3} {'seeds':>5} {'launches mean':>13} {'max':>4} "
            f"{'goal 2⌈log2 P⌉+2':>16} {'all found':>9} {'shares in 95% CI':>16} {'innocent blamed':>15}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.culprits:<21} {r.patches:>3} {r.seeds:>5} {r.mean:>13.2f} {r.max:>4} {r.goal:>16} "
                     f"{100 * r.found:>8.0f}% {100 * r.shares_in_ci:>15.0f}% {r.innocent_blamed:>15}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--launch-sd", type=float, default=0.0,
                        help=f"sd (tok/s) of one launch's offset, shared by its runs (theirs: sd {NOISE}); 0: none")
    ns = parser.parse_args(argv)
    sd: float = ns.launch_sd
    if sd > 0:
        print(f"launch offset: sd {sd} tok/s per launch (runs within a launch: sd {NOISE})\n")  # noqa: T201
    rows = [run_case(p, k, ns.seeds, sd) for k in (1, 2) for p in (4, 8, 16, 32)]
    print(table(rows))  # noqa: T201 - a benchmark script's output is its table
    print()  # noqa: T201
    print(effect_table([effect_case(p, k, ns.seeds, launch_sd=sd)  # noqa: T201
                        for k in (1, 2, 3) for p in (8, 16)]))
    print()  # noqa: T201
    print("bisect_patches' first search as wired (tools/checkout/bisect_effects.py), references of 5 runs each:")  # noqa: T201
    print(effect_table([wired_case(p, k, ns.seeds, launch_sd=sd) for k in (2, 3) for p in (8, 16)]))  # noqa: T201
    # Upstream commits (bisect_commits' search, benchmarks/upstream_cost.py): N = 16, 64, 256 and a row with skips.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from upstream_cost import run_upstream, upstream_table

    print()  # noqa: T201
    if sd > 0:
        print("upstream commits (upstream_cost.py's own simulated server, no launch offset):")  # noqa: T201
    print(upstream_table([run_upstream(n, ns.seeds) for n in (16, 64, 256)]  # noqa: T201
                         + [run_upstream(64, ns.seeds, skip_pct=10)]))


if __name__ == "__main__":
    main()
