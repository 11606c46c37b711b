"""nccl_sweep on this machine with an env-sensitive all_reduce_perf: grid, comparator gate, LL128 guard."""

from __future__ import annotations

from specdoctor.toolkit import registry
from specdoctor.tools.nccl.nccl import NcclSweep
from specdoctor.tools.nccl.nccl_grid import DEBUG_CLASS, expand_grid, message_sizes, parse_grid_option

SIZES = [14336, 43008, 229376]


def _sweep(ctx, **kw) -> NcclSweep:
    args = {"sizes": SIZES, "tp": 2, "interconnect": "pcie", "nccl_version": "2.21.5", "repeats": 6,
            "graph": 10, **kw}
    res = registry.call(ctx, "nccl_sweep", args)
    assert res.ok, res.summary
    return NcclSweep.model_validate(res.output)


def test_ll_wins_is_promoted_simple_is_not(perf_ctx):
    sweep = _sweep(perf_ctx, grid={"NCCL_PROTO": [None, "LL", "Simple", "LL128"], "NCCL_ALGO": [None, "Ring"]},
                   finalists=2)
    assert sweep.tool == "all_reduce_perf"
    by = {r.label: r for r in sweep.results}
    assert set(by) == {"default", "PROTO=LL", "PROTO=Simple", "ALGO=Ring", "PROTO=LL ALGO=Ring",
                       "PROTO=Simple ALGO=Ring"}
    assert {s.label for s in sweep.skipped} == {"PROTO=LL128", "PROTO=LL128 ALGO=Ring"}  # PCIe: never LL128
    assert set(sweep.promoted) <= {"PROTO=LL", "PROTO=LL ALGO=Ring"} and sweep.promoted
    assert sweep.best in sweep.promoted
    best = by[sweep.best]
    assert best.outcome == "DIFFERENT" and best.verdict == "better" and best.pct_change < -15
    assert len(best.scores) == 6 and len(by["default"].scores) == 6 and len(by["PROTO=Simple"].scores) == 1
    assert not by["PROTO=Simple"].promote and by["PROTO=Simple"].score_median > by["default"].score_median
    assert best.seen_by_nccl is True  # the stand-in logs 'set by environment' per rank, like NCCL
    assert "NCCL_PROTO" in best.experiment_only
    assert any("experiment-only" in n for n in sweep.notes)
    assert all(p.latency_us and p.latency_us > 0 for p in best.points) and [p.size for p in best.points] == SIZES
    # the ×2 sweep must bracket the largest size: -e is 14336·2^4 = 229376
    assert any("-e 229376" in n for n in sweep.notes)
    assert sweep.runs == 6 + 2 * 5 + 5  # screen every config once, then default + 2 finalists 5 more times


def test_too_few_repeats_promote_nothing(perf_ctx):
    sweep = _sweep(perf_ctx, grid={"NCCL_PROTO": [None, "LL"]}, repeats=3)
    assert sweep.promoted == [] and sweep.best is None
    assert any("fewer than 5" in n for n in sweep.notes)


def test_failing_config_is_recorded_not_fatal(perf_ctx):
    perf_ctx.host.base_env["FAKE_NCCL_FAIL"] = "Simple"
    sweep = _sweep(perf_ctx, grid={"NCCL_PROTO": [None, "Simple"]}, repeats=1)
    by = {r.label: r for r in sweep.results}
    assert by["PROTO=Simple"].failed.startswith("exit 3") and not by["PROTO=Simple"].scores


def test_grid_expansion_and_channels_by_version():
    configs, skipped = expand_grid(None, interconnect="nvlink", nccl_version="2.21.5")
    assert len(configs) == 3 * 3 * 2 * 3 and not skipped and configs[0].label == "default"
    ch = next(c for c in configs if c.label == "CHANNELS=4")
    assert ch.env == {"NCCL_MIN_CTAS": "4", "NCCL_MAX_CTAS": "4"}
    old, _ = expand_grid({"CHANNELS": [None, "16"]}, nccl_version="2.16.2")
    assert old[1].env == {"NCCL_MIN_NCHANNELS": "16", "NCCL_MAX_NCHANNELS": "16"}
    ok, _ = expand_grid({"NCCL_PROTO": ["LL128"]}, interconnect="nvlink")
    assert [c.label for c in ok] == ["default", "PROTO=LL128"]  # allowed on NVLink, default still added
    safe, skip = expand_grid({"NCCL_PROTO": ["^LL128", "LL,LL128"]}, interconnect="pcie")
    assert [c.label for c in safe] == ["default", "PROTO=^LL128"] and len(skip) == 1
    assert {"NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL"} <= DEBUG_CLASS


def test_grid_option_and_sizes():
    assert parse_grid_option(["NCCL_PROTO=default,LL"]) == {"NCCL_PROTO": [None, "LL"]}
    sizes = message_sizes(7168, 3, [1, 16])
    assert [(s.label, s.bytes) for s in sizes] == [("decode b=1", 14336), ("verify b=1", 43008),
                                                   ("decode b=16", 229376), ("verify b=16", 688128)]


def test_bad_grid_is_a_retryable_error(perf_ctx):
    res = registry.call(perf_ctx, "nccl_sweep", {"sizes": SIZES, "tp": 2, "interconnect": "pcie",
                                                 "grid": {"PROTO; rm -rf /": [None]}})
    assert res.status == "error" and "NCCL_" in res.summary
