"""The sweep's reference is what the workers run now: grid points apply on top of it, and 'remove' and 'as in the
good run' are always configurations (all_reduce_perf here is the env-sensitive stand-in: LL 14, unset 20,
Simple 30 µs base)."""

from __future__ import annotations

import json

from specdoctor.toolkit import registry
from specdoctor.tools.nccl.nccl import NcclSweep, relative_configs
from specdoctor.tools.nccl.nccl_grid import expand_grid

SIZES = [14336, 43008]


def _sweep(ctx, **kw) -> NcclSweep:
    args = {"sizes": SIZES, "tp": 2, "interconnect": "pcie", "nccl_version": "2.21.5", "repeats": 6,
            "grid": {"NCCL_PROTO": [None, "LL"], "NCCL_ALGO": [None, "Ring"]}, **kw}
    res = registry.call(ctx, "nccl_sweep", args)
    assert res.ok, res.summary
    return NcclSweep.model_validate(res.output)


def test_a_forced_slow_setting_is_the_reference_and_removing_it_is_a_candidate(perf_ctx, tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"worker_env": {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO"}}))
    sweep = _sweep(perf_ctx, current={"NCCL_PROTO": "Simple"}, good=str(good), not_removable=[], finalists=4)
    assert sweep.reference == "what the workers run now (NCCL_PROTO=Simple)"
    assert sweep.reference_env == {"NCCL_PROTO": "Simple"}
    by = {r.label: r for r in sweep.results}
    assert list(by)[0] == "current (NCCL_PROTO=Simple)"
    assert by["ALGO=Ring"].env == {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}  # on top of what runs now
    assert by["PROTO=LL"].env == {"NCCL_PROTO": "LL"}
    removed = by["remove NCCL_PROTO"]
    assert removed.env == {} and removed.unset == ["NCCL_PROTO"]
    as_good = by["as in the good run (NCCL_ALGO=Ring)"]  # the debug switch is not part of a setting
    assert as_good.env == {"NCCL_ALGO": "Ring"} and as_good.unset == ["NCCL_PROTO"]
    # NCCL left alone (20 µs) beats the workers' forced Simple (30 µs): "remove" is a winner, measured as such
    assert removed.promote and removed.verdict == "better" and removed.pct_change < -15
    assert sweep.best in ("PROTO=LL", "PROTO=LL ALGO=Ring") and f"best {sweep.best}" in sweep.summary_line()


def test_no_current_setting_is_the_plain_grid_as_before():
    # must not fire: with nothing set in the workers the sweep is NCCL's defaults plus the grid, unchanged
    grid, _ = expand_grid({"NCCL_PROTO": [None, "LL"]})
    configs, unsets, reference = relative_configs(grid, {}, None, [])
    assert [(c.label, c.env) for c in configs] == [("default", {}), ("PROTO=LL", {"NCCL_PROTO": "LL"})]
    assert unsets == {} and reference == "NCCL defaults"


def test_a_variable_set_inside_every_process_gets_no_remove_configuration():
    grid, _ = expand_grid({"NCCL_PROTO": [None, "LL"]})
    configs, unsets, _ = relative_configs(grid, {"NCCL_PROTO": "Simple"}, {"NCCL_PROTO": "LL"}, ["NCCL_PROTO"])
    labels = [c.label for c in configs]
    assert not any(label.startswith("remove") for label in labels)
    # the good run's LL is the same effective setting as the grid's PROTO=LL: measured once
    assert labels == ["current (NCCL_PROTO=Simple)", "PROTO=LL"]
