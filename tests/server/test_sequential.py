"""Group-sequential stopping: the spending boundaries keep A/A false positives at 1 % and call big changes early."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from specdoctor.stats.comparator import compare, look_sizes, sequential_ab
from specdoctor.stats.sequential import hsd_spending, log_t_p, nominal_levels


def _t_paths(rng: np.random.Generator, sizes: list[int], levels: list[float], shift: float, trials: int) -> np.ndarray:
    """Runs per arm at which Student's t on normal log-data first crosses the levels (0: never)."""
    a = rng.normal(0.0, 1.0, (trials, sizes[-1]))
    b = rng.normal(shift, 1.0, (trials, sizes[-1]))
    stop = np.zeros(trials, dtype=int)
    for n, level in zip(sizes, levels, strict=True):
        p = stats.ttest_ind(a[:, :n], b[:, :n], axis=1).pvalue
        stop[(p <= level) & (stop == 0)] = n
    return stop


def test_one_look_spends_everything_and_levels_fall_with_more_looks():
    assert nominal_levels([10], 0.01) == pytest.approx([0.01], rel=1e-6)
    levels = nominal_levels(look_sizes(4, 1, 30), 0.01)
    assert len(levels) == 27 and all(0 < x < 0.01 for x in levels)
    assert levels[0] == pytest.approx(hsd_spending(4 / 30, 0.01), rel=1e-6)  # the first look spends exactly its share
    assert sum(levels) > 0.01  # correlated looks: the nominal levels add up to more than a Bonferroni split would
    with pytest.raises(ValueError):
        nominal_levels([5, 4], 0.01)
    with pytest.raises(ValueError):
        nominal_levels([4, 5], 1.5)


def test_boundaries_hold_the_false_positive_rate_and_find_large_changes_early():
    sizes = look_sizes(4, 1, 30)
    levels = nominal_levels(sizes, 0.01)
    rng = np.random.default_rng(11)
    aa = _t_paths(rng, sizes, levels, 0.0, 20000)
    assert (aa > 0).mean() <= 0.0125  # 1 % design; 20,000 paths: 3 standard errors above is 0.0121
    big = _t_paths(rng, sizes, levels, np.log(0.9) / 0.03, 2000)  # 10 % drop at CV 3 %
    assert (big > 0).all() and np.quantile(big, 0.9) <= 6
    naive = _t_paths(rng, sizes, [0.01] * len(sizes), 0.0, 20000)  # the same looks without spending
    assert (naive > 0).mean() > 0.03  # ... would be several times over budget: the boundaries are doing the work


def test_log_t_handles_degenerate_samples():
    assert log_t_p([100.0] * 4, [100.0] * 4) == 1.0
    assert log_t_p([100.0] * 4, [90.0] * 4) == 0.0
    assert log_t_p([100.0, -1.0], [1.0, 2.0]) == 1.0
    assert log_t_p([100, 101, 99, 100], [90, 91, 89, 90]) < 1e-4


def test_a_single_outlier_cannot_carry_a_sequential_different():
    a, b = [100.0, 100.2, 99.9, 100.1], [100.1, 99.8, 100.2, 70.0]
    c = compare(a, b, t_level=0.5)  # a level the t-test passes
    assert c.p_t is not None and c.p_t <= 0.5 and c.p_value > 0.05 and c.outcome != "DIFFERENT"
    assert compare(a, b).test == "rank" and compare(a, b).p_t is None


def test_sequential_driver_calls_ten_percent_in_six_runs_and_keeps_aa_same():
    rng = np.random.default_rng(5)
    runs = []
    for _ in range(20):
        r = sequential_ab(lambda: rng.normal(100, 3), lambda: rng.normal(90, 3))
        assert r.comparison.outcome == "DIFFERENT" and r.comparison.verdict == "worse"
        runs.append(len(r.a))
    assert np.median(runs) <= 5 and max(runs) <= 8
    aa = [sequential_ab(lambda: rng.normal(100, 3), lambda: rng.normal(100, 3)).comparison.outcome for _ in range(20)]
    assert "DIFFERENT" not in aa and aa.count("SAME") >= 15


def _grow(rng: np.random.Generator, fixed_mean: float, grown_mean: float, cv: float = 0.03) -> tuple[str, int]:
    from specdoctor.stats.comparator import GrowingArm

    g = GrowingArm(rng.normal(fixed_mean, fixed_mean * cv, 8), 5, magnitude=0.1 * fixed_mean)
    s = list(rng.normal(grown_mean, grown_mean * cv, 5))
    while k := g.more(s):
        s += list(rng.normal(grown_mean, grown_mean * cv, k))
    return g.final(s)["outcome"], len(s)


def test_growing_arm_keeps_false_positives_near_one_percent_and_decides_a_ten_percent_change_at_once():
    """One arm already measured (today's server), the other grows on one launch: the looks keep the A/A rate at
    the 1 % budget while a 10 % change at CV 3 % is called at the first look; with the subtraction's magnitude
    (half a 20 % gap to the claims) a null effect is settled as SAME."""
    rng = np.random.default_rng(5)
    aa = [_grow(rng, 100.0, 100.0)[0] for _ in range(400)]
    assert aa.count("DIFFERENT") / len(aa) <= 0.025
    assert aa.count("SAME") / len(aa) >= 0.9  # a null effect is settled, not left UNKNOWN
    ten = [_grow(rng, 100.0, 90.0) for _ in range(200)]
    assert sum(o == "DIFFERENT" for o, _ in ten) / len(ten) >= 0.95
    assert sorted(n for _, n in ten)[int(0.9 * len(ten))] <= 6  # p90 runs on the growing arm
