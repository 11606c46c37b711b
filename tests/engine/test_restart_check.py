"""The box check's throughput half as a pure judgement: a slower first look is re-measured, NOT needs both."""

from __future__ import annotations

import random

from specdoctor.engine.actions.restart_check import identity_differences, judge_throughput

BEFORE = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1]


def _runs(level: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, 0.01)) for _ in range(n)]


def _measurer(levels: list[float]):
    """Each call to measure is one benchmark batch at the next level (the last repeats)."""
    calls: list[int] = []

    def measure(n: int) -> list[float]:
        level = levels[min(len(calls), len(levels) - 1)]
        calls.append(n)
        return _runs(level, n, seed=len(calls))

    return measure, calls


def test_a_slower_first_look_that_recovers_reads_same_with_the_reason():
    measure, calls = _measurer([66.0, 100.0])
    j = judge_throughput(BEFORE, 8, measure)
    assert j.outcome == "SAME" and len(calls) >= 2
    assert j.replaced and max(j.replaced) < 70 and "warming up" in j.reason and "re-measured" in j.reason


def test_a_slowdown_that_survives_the_re_measurement_reads_different():
    measure, calls = _measurer([66.0, 70.0])
    j = judge_throughput(BEFORE, 8, measure)
    assert j.outcome == "DIFFERENT" and "survives a re-measurement" in j.reason
    assert j.comparison is not None and j.comparison.pct_change < -20


def test_same_at_once_needs_no_second_look():
    measure, calls = _measurer([100.0])
    j = judge_throughput(BEFORE, 8, measure)
    assert j.outcome == "SAME" and calls == [8] and not j.replaced


def test_faster_after_is_not_re_measured():
    measure, calls = _measurer([130.0])
    j = judge_throughput(BEFORE, 8, measure)
    assert j.outcome == "DIFFERENT" and j.comparison is not None and j.comparison.pct_change > 0 and calls == [8]


def test_a_failed_benchmark_or_too_few_runs_before_is_unknown_with_why():
    assert judge_throughput(BEFORE, 8, lambda n: None).reason == "the benchmark after the restart failed"
    j = judge_throughput([100.0, 101.0], 8, lambda n: [100.0] * n)
    assert j.outcome == "UNKNOWN" and "need 3" in j.reason


def test_identity_differences_name_what_differs_and_tolerate_memory_noise():
    assert identity_differences(identity=("a" * 16, "a" * 16), port=(30000, 30000), gpu_mib=(80000, 80300)) == []
    d = identity_differences(identity=("a" * 16, "b" * 16), port=(30000, 30001), gpu_mib=(80000, 60000))
    assert len(d) == 3 and "port :30000 → :30001" in d and any("80000 → 60000 MiB" in x for x in d)
    assert identity_differences(identity=(None, "b"), port=(None, 1), gpu_mib=(None, 5)) == []
