"""The comparator, claim checks, the sequential A/B driver and the threshold table."""

from __future__ import annotations

import numpy as np
import pytest

from specdoctor.stats.comparator import compare, compare_to_claim, looks_for, sequential_ab
from specdoctor.stats.summary import median_ci, summarize
from specdoctor.stats.thresholds import HIGH_THRESHOLDS, SIZES, high_threshold, min_p, simulate_high_threshold


def test_pinpoint_examples_need_both_tests():
    p, ks, mwu = min_p([0] * 20, [0] * 15 + [1] * 5)  # Pinpoint's 0.0097 was one-sided; two-sided is 2x
    assert abs(mwu - 2 * 0.0097) < 0.001 and ks > 0.4 and p == mwu
    p, ks, mwu = min_p(list(range(10, 30)), list(range(10)) + list(range(30, 40)))
    assert ks < 0.02 and mwu > 0.4 and p == ks  # exact KS (Pinpoint quoted the asymptotic 0.0082)


def test_compare_outcomes_and_effect():
    rng = np.random.default_rng(1)
    a, b = rng.normal(82, 1, 10), rng.normal(60, 1, 10)
    c = compare(a, b, unit="tok/s")
    assert c.outcome == "DIFFERENT" and c.verdict == "worse"
    assert c.delta_ci[0] <= c.delta <= c.delta_ci[1] < 0 and -30 < c.pct_change < -24
    same = compare(rng.normal(82, 1, 40), rng.normal(82, 1, 40), magnitude=4.1)
    assert same.outcome == "SAME" and same.verdict == "no change"
    few = compare([82, 83, 81], [82.5, 81.5, 82.2], magnitude=0.5)
    assert compare([82, 83, 81], [82.5, 81.5, 82.2]).outcome == "SAME"  # 4.1 tok/s is ~5 IQR: ruled out
    assert few.outcome == "UNKNOWN"
    assert compare([1, 2], [1, 2]).outcome == "UNKNOWN"  # too few runs


def test_claims_of_the_seed_are_different():
    rng = np.random.default_rng(2)
    base, spec = list(rng.normal(82, 0.8, 5)), list(rng.normal(60, 0.8, 5))
    assert compare_to_claim(base, 89).outcome == "DIFFERENT"
    c = compare_to_claim(spec, 94, unit="tok/s")
    assert c.outcome == "DIFFERENT" and c.pct_change < -30 and "DIFFERENT" in c.summary_line()
    assert compare_to_claim(base, float(np.median(base)) * 1.005).outcome == "SAME"
    assert compare_to_claim([82, 83], 89).outcome == "UNKNOWN"


def test_sequential_interleaves_and_stops():
    rng = np.random.default_rng(3)
    r = sequential_ab(lambda: rng.normal(100, 3), lambda: rng.normal(88, 3))
    assert r.comparison.outcome == "DIFFERENT" and len(r.a) == len(r.b) <= 6
    assert r.comparison.test == "sequential-log-t" and r.comparison.p_t is not None
    assert r.order[:4] == ["A", "B", "B", "A"] and r.order.count("A") == len(r.a)
    flat = sequential_ab(lambda: 100.0, lambda: 100.0)
    assert flat.comparison.outcome == "SAME" and flat.looks == 1
    calls = []
    capped = sequential_ab(lambda: rng.normal(100, 30), lambda: rng.normal(100, 30), cap=15,
                           magnitude=0.5, on_round=calls.append)
    assert capped.capped and len(capped.a) == 15 and len(calls) == capped.looks == looks_for(4, 1, 15) == 12
    with pytest.raises(ValueError):
        sequential_ab(lambda: 1.0, lambda: 1.0, start=10, cap=5)


def test_thresholds_table_reproduces_and_interpolates():
    assert SIZES[0] == 3 and all(len(v) == len(SIZES) for v in HIGH_THRESHOLDS.values())
    assert high_threshold(1.0, 30) < 0.02 < high_threshold(1.0, 20)  # Pinpoint: ~30 samples at 1 IQR
    assert high_threshold(2.0, 10) < 0.01 < high_threshold(2.0, 8)   # ~10 at 2 IQR
    assert high_threshold(1.0, 12) > high_threshold(1.2, 12) > high_threshold(1.5, 12)
    assert high_threshold(1.0, 2) == 1.0
    assert abs(simulate_high_threshold(1.0, 10, trials=3000, seed=5) - HIGH_THRESHOLDS[1.0][SIZES.index(10)]) < 0.08


def test_summary_and_ci():
    s = summarize([82.0, 81.5, 83.0, 82.2, 81.9])
    assert s.median == 82.0 and s.ci_low <= 82.0 <= s.ci_high and 0 < s.cv < 0.01
    assert median_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)
    assert summarize([]).n == 0


def test_power_benchmark_meets_its_goals_on_a_small_run():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "comparator_power.py"
    spec = importlib.util.spec_from_file_location("comparator_power", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.aa_false_positive_rate(150, 0.03, 11, sequential=True) <= 0.02
    assert mod.runs_needed(10.0, 40, 0.03, 12)["median"] <= 10
