"""Power of the comparator (pure statistics, seeded): A/A false positives and runs needed at CV 3 %."""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from specdoctor.stats.comparator import GrowingArm, compare, sequential_ab

__all__ = ["aa_false_positive_rate", "runs_needed", "growing_arm", "main"]


def _arm(rng: np.random.Generator, mean: float, cv: float):
    return lambda: float(rng.normal(mean, mean * cv))


def aa_false_positive_rate(trials: int, cv: float, seed: int, *, sequential: bool, n: int = 10) -> float:
    """Share of A/A trials called DIFFERENT (one look at n runs, or the full sequential driver)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        if sequential:
            out = sequential_ab(_arm(rng, 100.0, cv), _arm(rng, 100.0, cv)).comparison.outcome
        else:
            out = compare(rng.normal(100, 100 * cv, n), rng.normal(100, 100 * cv, n)).outcome
        hits += out == "DIFFERENT"
    return hits / trials


def runs_needed(change_pct: float, trials: int, cv: float, seed: int) -> dict[str, float]:
    """Runs per arm until the sequential driver says DIFFERENT for a true change (median, p90, share found)."""
    rng = np.random.default_rng(seed)
    runs: list[int] = []
    found = 0
    for _ in range(trials):
        res = sequential_ab(_arm(rng, 100.0, cv), _arm(rng, 100.0 * (1 - change_pct / 100), cv))
        if res.comparison.outcome == "DIFFERENT":
            found += 1
            runs.append(len(res.a))
        else:
            runs.append(10**6)  # not found within the cap
    runs.sort()
    p90 = runs[int(0.9 * (len(runs) - 1))]
    return {"median": statistics.median(runs), "p90": p90, "found": found / trials}


def growing_arm(change_pct: float, trials: int, cv: float, seed: int, *, fixed: int = 8,
                magnitude_pct: float | None = None) -> dict[str, float]:
    """The subtraction's design: one arm already measured (`fixed` runs of today's server), the other grown on one
    server (5, then +3 per look, cap 14). Share called DIFFERENT / SAME, and runs on the grown arm (median, p90)."""
    rng = np.random.default_rng(seed)
    outcomes: list[str] = []
    runs: list[int] = []
    for _ in range(trials):
        g = GrowingArm(rng.normal(100.0, 100.0 * cv, fixed), 5,
                       magnitude=magnitude_pct)
        mean = 100.0 * (1 - change_pct / 100)
        s = list(rng.normal(mean, mean * cv, 5))
        while k := g.more(s):
            s += list(rng.normal(mean, mean * cv, k))
        outcomes.append(g.final(s)["outcome"])
        runs.append(len(s))
    runs.sort()
    return {"different": outcomes.count("DIFFERENT") / trials, "same": outcomes.count("SAME") / trials,
            "median": statistics.median(runs), "p90": runs[int(0.9 * (len(runs) - 1))]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--cv", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rows = [
        ("A/A false-positive rate, one look at 10 runs/arm", f"{aa_false_positive_rate(args.trials, args.cv, args.seed, sequential=False):.2%}", "<= 1 %"),
        ("A/A false-positive rate, sequential 4..30 runs/arm (a look after every run)", f"{aa_false_positive_rate(args.trials, args.cv, args.seed + 1, sequential=True):.2%}", "<= 1 %"),
    ]
    for change, goal in ((10.0, 6), (5.0, 30)):
        r = runs_needed(change, args.trials, args.cv, args.seed + int(change))
        p90 = "> cap" if r["p90"] >= 10**6 else f"{r['p90']:.0f}"
        rows.append((f"runs/arm to call a {change:g} % change (median / p90, found)",
                     f"{r['median']:.0f} / {p90}, {r['found']:.1%}", f"<= {goal}"))
    aa = growing_arm(0.0, args.trials, args.cv, args.seed + 20)
    rows.append(("subtraction (8 runs reused vs one server, looks 5..14): A/A called DIFFERENT",
                 f"{aa['different']:.2%}", "<= 1 %"))
    same = growing_arm(0.0, args.trials, args.cv, args.seed + 21, magnitude_pct=10.0)
    rows.append(("  same, no change, SAME within half a 20 % gap (share SAME, runs median / p90)",
                 f"{same['same']:.1%}, {same['median']:.0f} / {same['p90']:.0f}", ">= 90 %"))
    ten = growing_arm(10.0, args.trials, args.cv, args.seed + 22)
    rows.append(("  same, a 10 % change (found, runs median / p90)",
                 f"{ten['different']:.1%}, {ten['median']:.0f} / {ten['p90']:.0f}", "<= 6"))
    width = max(len(r[0]) for r in rows)
    print(f"comparator power at CV {args.cv:.0%}, {args.trials} trials each, seed {args.seed}")
    print(f"{'measure':<{width}}  {'result':<24}  goal")
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:<24}  {goal}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
