"""`report diff`: identity noise (pids, ports, timestamps) is no difference, numbers compare as numbers, ranking."""

from __future__ import annotations

from specdoctor.report import diff_reports
from specdoctor.report.diff import is_identity, same_value

from .report_builders import seed_report


def test_identity_noise_and_number_formatting_are_not_differences() -> None:
    a, b = seed_report(seed=1), seed_report(seed=1)
    assert a.fingerprint is not None and b.fingerprint is not None
    a.fingerprint.current["gpu_processes"] = [{"pid": 101, "name": "sglang::scheduler_TP0", "used_mib": "90061"},
                                              {"pid": 102, "name": "sglang::scheduler_TP1", "used_mib": "90061"}]
    b.fingerprint.current["gpu_processes"] = [{"pid": 977, "name": "sglang::scheduler_TP1", "used_mib": "90013"},
                                              {"pid": 975, "name": "sglang::scheduler_TP0", "used_mib": "90050"}]
    a.fingerprint.current["server"] = {"port": 30000, "started": 1760000000.0, "sm_clock_mhz": 2617}
    b.fingerprint.current["server"] = {"port": 41234, "started": 1760003600.5, "sm_clock_mhz": 2617.0}
    assert diff_reports(a, b).fingerprint == []


def test_real_changes_are_kept_and_ranked_by_impact_then_size() -> None:
    a, b = seed_report(seed=1), seed_report(seed=1)
    assert a.fingerprint is not None and b.fingerprint is not None
    a.fingerprint.current["gpus"] = [{"index": 0, "pcie_gen": 5, "sm_clock_mhz": 2617, "pid": 1},
                                     {"index": 1, "pcie_gen": 5, "sm_clock_mhz": 2617, "pid": 2}]
    b.fingerprint.current["gpus"] = [{"index": 0, "pcie_gen": 5, "sm_clock_mhz": 2610, "pid": 8},
                                     {"index": 1, "pcie_gen": 1, "sm_clock_mhz": 2617, "pid": 9}]
    a.fingerprint.current["kernel"] = "6.8.0"
    b.fingerprint.current["kernel"] = "6.8.1"
    d = diff_reports(a, b)
    keys = [c.key for c in d.fingerprint]
    assert keys == ["gpus[1].pcie_gen", "gpus[0].sm_clock_mhz", "kernel"], keys
    assert [c.impact for c in d.fingerprint] == ["high", "high", "low"]


def test_measurements_rank_different_first() -> None:
    a, b = seed_report(seed=1), seed_report(seed=2)
    spec = b.measurements[1]
    spec.samples = [x - 6.0 for x in spec.samples]
    spec.median = (spec.median or 0) - 6.0
    d = diff_reports(a, b)
    assert d.measurements[0].label == spec.label and d.measurements[0].outcome == "DIFFERENT"
    assert all(m.outcome != "DIFFERENT" for m in d.measurements[1:])


def test_identity_rule_does_not_swallow_configuration() -> None:
    for key in ("server.port", "gpu_processes[x].pid", "meta.started", "x.timestamp"):
        assert is_identity(key), key
    for key in ("nccl_version", "gpus[0].pcie_gen", "worker_env.NCCL_PROTO", "launch.tp_size", "support"):
        assert not is_identity(key), key
    assert same_value("2617", "2617.0") and not same_value("2617", "2616.9") and not same_value("LL", "Simple")
