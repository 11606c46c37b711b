"""fingerprint_diff compares typed values (int/float/units/formatting are no change) and ranks by expected impact."""

from __future__ import annotations

from specdoctor.tools.environment.fingerprint import diff_fingerprints, same_value


def _gpu(**kw):
    base = {"index": 0, "name": "NVIDIA H200", "sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980,
            "mem_clock_mhz": 3201, "power_limit_w": 700, "pcie_gen": 5, "pcie_width": 16,
            "persistence_mode": "Enabled"}
    return {**base, **kw}


def test_int_float_units_and_case_are_not_changes():
    assert same_value(2617, 2617.0) and same_value("2617", 2617) and same_value("2617 MHz", 2617.0)
    assert same_value("600.00 W", 600) and same_value(" Enabled", "enabled")
    good = {"driver": "580.95.05", "cuda_driver": "13.0", "dirty_files": 3, "gpus": [_gpu()]}
    now = {"driver": "580.95.05 ", "cuda_driver": 13, "dirty_files": 3.0,
           "gpus": [_gpu(sm_clock_mhz=1980.0, max_sm_clock_mhz="1980 MHz", power_limit_w="700.00 W",
                         pcie_gen="5", persistence_mode="enabled")]}
    assert diff_fingerprints(good, now).changes == []


def test_real_changes_still_found_and_ranked_by_impact():
    good = {"sglang_version": "0.5.9", "gpus": [_gpu(), _gpu(index=1)], "worker_env": {"NCCL_PROTO": "LL"}}
    now = {"sglang_version": "0.5.10", "worker_env": {"NCCL_PROTO": "LL ", "CUDA_MODULE_LOADING": "LAZY"},
           "gpus": [_gpu(sm_clock_mhz=1410), _gpu(index=1, pcie_width=8, max_sm_clock_mhz=1975)]}
    changes = diff_fingerprints(good, now).changes
    by_key = {c.key: c for c in changes}
    assert "worker_env.NCCL_PROTO" not in by_key  # trailing blank only
    link = by_key["gpus[1].pcie_width"]
    assert link.impact == "high" and "50%" in link.why  # the link trained down to x8
    assert by_key["gpus[1].max_sm_clock_mhz"].impact == "low"  # 0.25 %: noise-sized
    assert by_key["gpus[0].sm_clock_mhz"].impact == "low"  # an instantaneous reading
    assert changes[0].key == "gpus[1].pcie_width"  # the one change expected to matter comes first
    assert [c.impact for c in changes] == sorted((c.impact for c in changes), key=["high", "medium", "low"].index)


def test_env_text_is_compared_as_the_program_reads_it():
    # "1" and "1.0" are two different strings to NCCL/CUDA: an env value is never numerically collapsed
    d = diff_fingerprints({"worker_env": {"NCCL_P2P_LEVEL": "1"}}, {"worker_env": {"NCCL_P2P_LEVEL": "1.0"}})
    assert [c.key for c in d.changes] == ["worker_env.NCCL_P2P_LEVEL"]
