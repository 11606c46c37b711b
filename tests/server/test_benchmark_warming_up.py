"""A fresh server's first runs that are still warming up are replaced, not measured (stats.warmup).

Seen on the real SGLang 0.5.17: a baseline server launched a moment before ran its first measured runs at a
fraction of its speed (H100: 284, 285 then 457, 708, 670 tok/s; H200: 429 then 517, 630, 629, 617), which moved the
median by a third. The rule must fire on those and on the twin made to warm up the same way, and on nothing else:
not on any other real measurement the project holds, not on stationary noise, not on a warm server."""

from __future__ import annotations

import random
import statistics

import pytest

from specdoctor.parsers.sglang import parse_launch_command
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.sim.scenario import Warmup
from specdoctor.stats.warmup import warming_prefix
from specdoctor.toolkit import ToolContext, registry

# Fresh baseline servers on the real engine, in run order (benchmarks/results/real-sglang: fifth-contact-h100's
# code-regression run.log, first-contact/env-var/report.json).
REAL_WARMING = {"h100-baseline": ([283.7, 284.9, 457.4, 707.7, 669.7], 2),
                "h200-baseline": ([429.0, 517.1, 630.1, 628.9, 616.6], 2)}
# Every other real measurement in those reports (fresh servers and looks at running ones): none was warming up.
REAL_SETTLED = [
    [699, 597, 710, 763, 753], [362, 325, 304, 327, 361, 368, 327, 356], [338, 303, 283, 307, 342, 349, 305, 337],
    [373, 373, 367, 331, 350], [804, 877, 848, 882, 862], [710, 737, 610, 613, 611, 610, 738, 714],
    [756, 729, 723, 683, 718], [98, 84, 62, 102, 93], [92, 96, 126, 104, 89, 87, 86, 104],
    [475, 471, 490, 508, 507, 489, 494, 504], [627, 473, 467, 456, 467], [422, 418, 434, 447, 447, 433, 437, 444],
    [280, 287, 296, 286, 276, 287, 282, 285], [262, 268, 276, 267, 259, 268, 263, 266], [772, 666, 782, 604, 575],
    [506, 518, 516, 474, 516, 483, 531, 483], [477, 489, 487, 449, 485, 459, 502, 458]]


@pytest.mark.parametrize("name", sorted(REAL_WARMING))
def test_the_real_warming_runs_are_found(name):
    samples, k = REAL_WARMING[name]
    assert warming_prefix(samples) == k


def test_no_other_real_measurement_is_called_warming():
    assert [s for s in REAL_SETTLED if warming_prefix(s)] == []


@pytest.mark.parametrize(("cv", "at_most"), [(0.025, 0.0), (0.10, 0.015), (0.22, 0.05)])
def test_stationary_noise_seldom_looks_like_warming(cv, at_most):
    """Independent runs at the twin's spread, a noisy box's, and the noisiest real one (cv 22 %): a false call
    costs only the runs it replaces, but it must stay rare."""
    rng = random.Random(7)
    draws = [[rng.lognormvariate(0, cv) for _ in range(5)] for _ in range(4000)]
    rate = sum(1 for d in draws if warming_prefix(d)) / len(draws)
    assert rate <= at_most, rate


def test_a_leading_fast_run_or_a_slowdown_later_is_not_warming():
    assert warming_prefix([700, 300, 310, 305, 300]) == 0  # a fast first run, then slower: not a warm-up
    assert warming_prefix([700, 690, 300, 310, 305]) == 0  # slower later (throttling, a neighbour): not a warm-up
    assert warming_prefix([300, 700, 690]) == 0  # too few runs left to call the first one slow


def _server(tmp_path, warmup: Warmup | None):
    sc = load_scenario("no-regression")
    if warmup is not None:
        sc.perf.warmup = warmup
    sb = build_sandbox(sc, tmp_path / "box")
    return sb, SimHost(sb)


def _bench(host, warmup_runs: int) -> dict:
    ctx = ToolContext(host=host, run_id="warming-up", auto_approve=True)
    port = parse_launch_command(host.hints.launch).port
    res = registry.call(ctx, "benchmark", {"port": port, "runs": 5, "requests_per_run": 3, "max_new_tokens": 64,
                                           "warmup_runs": warmup_runs, "label": "spec"})
    assert res.ok, res.summary
    return res.output


def test_a_twin_that_warms_up_like_the_real_engine_is_measured_once_settled(tmp_path):
    """The twin's first 10 requests after start 3x slower: its own start-up request, the benchmark's warm-up run
    and the first two measured runs. Those two are replaced; the next look (no warm-up) agrees with the median."""
    sb, host = _server(tmp_path, Warmup(requests=10, factor=3.0))
    try:
        first = _bench(host, warmup_runs=1)
        later = _bench(host, warmup_runs=0)
    finally:
        host.close()
        sb.remove()
    assert len(first["warmup_discarded"]) == 2, first["warmup_discarded"]
    assert max(first["warmup_discarded"]) < 0.5 * min(first["samples"])
    assert any(f["kind"] == "warming-up" for f in first["findings"])
    assert len(first["samples"]) == 5
    assert first["median"] == pytest.approx(statistics.median(later["samples"]), rel=0.1)
    assert later["warmup_discarded"] == []  # a later look on the same server is not checked again


def test_a_twin_that_does_not_warm_up_keeps_every_run(tmp_path):
    sb, host = _server(tmp_path, None)
    try:
        out = _bench(host, warmup_runs=1)
    finally:
        host.close()
        sb.remove()
    assert out["warmup_discarded"] == [] and not any(f["kind"] == "warming-up" for f in out["findings"])
    assert len(out["samples"]) == 5
