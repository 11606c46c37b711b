"""nccl-tests tables, -J JSON and NCCL_DEBUG lines: every copied real sample, plus hand-made edge cases."""

from __future__ import annotations

import json

import pytest

from specdoctor.parsers.nccl import (
    latency_at,
    nccl_version_from_code,
    parse_all_reduce,
    parse_nccl_debug,
    parse_nccl_tests,
    parse_nccl_tests_json,
)


def test_srun_label_prefix_no_footer(fixture_text):
    run = parse_all_reduce(fixture_text("2x-p4de-a100-efa-srun-label-prefix-no-footer.txt"))
    assert len(run.rows) == 29
    first, last = run.rows[0], run.rows[-1]
    assert (first.size, first.count, first.dtype, first.redop, first.root) == (8, 2, "float", "sum", -1)
    assert first.out_of_place.time_us == 164.3 and first.in_place.time_us == 163.3
    assert first.time_us == 163.3  # in-place preferred
    assert (last.size, last.out_of_place.busbw) == (2147483648, 78.33)
    assert run.avg_busbw is None


def test_five_collectives_picks_all_reduce(fixture_text):
    text = fixture_text("2x-rtx2080ti-five-collectives-one-session-incl-g1-reduce.txt")
    runs = parse_nccl_tests(text)
    assert [r.collective for r in runs] == ["all_reduce", "all_gather", "broadcast", "reduce", "reduce", "alltoall"]
    assert [r.ngpus for r in runs] == [2, 2, 2, 2, 1, 2]
    ar = parse_all_reduce(text)
    assert ar.avg_busbw == pytest.approx(2.05774) and ar.out_of_bounds == 0
    assert ar.rows[0].out_of_place.time_us == 12.25 and ar.rows[-1].size == 1073741824
    assert runs[4].avg_busbw == 202818


def test_old_error_column_without_root(fixture_text):
    run = parse_all_reduce(fixture_text("2x8-h20-nvls-old-nccl-tests-error-column-no-root-EXCERPT.txt"))
    assert [r.size for r in run.rows] == [4, 8, 16, 32, 64, 128, 256, 512]
    assert run.rows[0].root is None
    assert run.rows[0].out_of_place.time_us == 47.54 and run.rows[0].in_place.wrong == pytest.approx(4e-7)


def test_mpirun_16_ranks_with_markdown(fixture_text):
    run = parse_all_reduce(fixture_text("a3mega-2x8-h100-mpirun-16ranks.txt"))
    assert run.collective == "all_reduce" and run.ngpus == 1 and run.graph == 0
    assert len(run.rows) == 31 and run.rows[-1].size == 8589934592
    assert run.avg_busbw == pytest.approx(70.742)


def test_tagged_stdout_prefix_and_elided_rows(fixture_text):
    run = parse_all_reduce(fixture_text("eks-2x-p5-mpirun-tagged-stdout-prefix-elided-rows.txt"))
    assert [r.size for r in run.rows] == [0, 67108864, 134217728, 268435456, 536870912, 1073741824, 2147483648]
    assert run.rows[0].out_of_place.time_us == 15.51
    assert run.avg_busbw == pytest.approx(52.9753)


def test_indented_dots_and_shifted_last_row(fixture_text):
    run = parse_all_reduce(fixture_text("p5en-h200-rows-elided-with-indented-dots.txt"))
    assert [r.size for r in run.rows] == [8, 16, 17179869184]
    assert run.rows[0].out_of_place.time_us == 983.2  # the warm-up outlier is data, kept as printed
    assert run.rows[-1].in_place.busbw == 369.42
    assert run.avg_busbw == pytest.approx(84.0569)


def test_debug_logs_have_no_tables(fixture_text):
    for name in ("2x-rtx5090-genoa-nccl-2.25.1-maxsharedmem-EXCERPT.txt",
                 "4x-rtx4090-p2p-patched-driver-p2p-level-SYS-nccl-2.23.4-EXCERPT.txt"):
        assert all(not r.rows for r in parse_nccl_tests(fixture_text(name)))
        with pytest.raises(ValueError):
            parse_all_reduce(fixture_text(name))


@pytest.mark.parametrize("name,version,driver,lines", [
    ("2x-rtx5090-genoa-nccl-2.25.1-maxsharedmem-EXCERPT.txt", "2.25.1+cuda12.8", 12080, 11),
    ("4x-rtx4090-p2p-patched-driver-p2p-level-SYS-nccl-2.23.4-EXCERPT.txt", "2.23.4+cuda12.6", 12060, 8),
    ("fsdp-4x-p5-srun-label-prefix-nccl-2.26.2-ofi-mixed-with-app-log.txt", "2.26.2+cuda12.2", 12080, 4),
    ("nccl-2.18.3-mpirun-timestamp-tag-output-prefix-topology-EXCERPT.txt", None, None, 11),
    ("ray-actor-prefix-rtx-pro-6000-sm120-nccl-2.27.5-named-symbol.txt", "2.27.5+cuda12.9", 13010, 5),
])
def test_debug_samples(fixture_text, name, version, driver, lines):
    log = parse_nccl_debug(fixture_text(name))
    assert (log.version, log.cuda_driver, len(log.lines)) == (version, driver, lines)


def test_set_by_environment_per_process(fixture_text):
    log = parse_nccl_debug(fixture_text("p2p-level-LOC-by-env-shm-fallback-2gpu-multi-comm-EXCERPT.txt"))
    assert log.env_by_pid("NCCL_P2P_LEVEL") == {65959: "LOC"}
    assert {ln.pid for ln in log.lines} == {65957, 65958, 65959, 65960}


def test_warn_with_source_location(fixture_text):
    log = parse_nccl_debug(fixture_text("ray-actor-prefix-rtx-pro-6000-sm120-nccl-2.27.5-named-symbol.txt"))
    assert log.warnings == ["Cuda failure 'named symbol not found'"]


def _json_doc() -> dict:
    """The shape nccl-tests' util.cu writes with -J (format version 2)."""
    return {"version": 2, "start_time": "2026-01-01 00:00:00", "args": ["./build/all_reduce_perf", "-b", "8"],
            "env": [], "nccl_version": 22703,
            "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 8, "maximum_bytes": 16, "step_factor": 2,
                       "graph": 10, "devices": []},
            "results": [{"size": 8, "count": 4, "type": "bfloat16", "redop": "sum", "root": "    -1",
                         "out_of_place": {"time": 20.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                         "in_place": {"time": 19.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None},
                         "actual_iterations": 20, "experiment_name": ""},
                        {"size": 16, "count": 8, "type": "bfloat16", "redop": "sum", "root": "    -1",
                         "out_of_place": {"cpu_time": 30.0, "alg_bw": "nan", "bus_bw": 0.0, "nwrong": 0.0},
                         "in_place": None}],
            "out_of_bounds": {"count": 0, "okay": "true"},
            "average_bus_bandwidth": {"bandwidth": 0.001, "okay": "unchecked"}}


def test_json_report():
    run = parse_nccl_tests_json(json.dumps(_json_doc()))
    assert (run.collective, run.ngpus, run.graph, run.nccl_version, run.source) == ("all_reduce", 8, 10, "2.27.3", "json")
    assert run.rows[0].root == -1 and run.rows[0].time_us == 19.5 and run.rows[0].in_place.wrong is None
    assert run.rows[1].time_us == 30.0 and run.rows[1].out_of_place.algbw is None
    assert parse_all_reduce(json.dumps(_json_doc())).rows == run.rows
    with pytest.raises(ValueError):
        parse_nccl_tests_json('{"version": 2}')


def test_version_codes():
    assert nccl_version_from_code(22703) == "2.27.3"
    assert nccl_version_from_code(21805) == "2.18.5"
    assert nccl_version_from_code(2708) == "2.7.8"


def test_latency_interpolation(fixture_text):
    run = parse_all_reduce(fixture_text("2x-rtx2080ti-five-collectives-one-session-incl-g1-reduce.txt"))
    assert latency_at(run, 16384) == 17.07
    mid = latency_at(run, 24576)  # between 16 KiB (17.07) and 32 KiB (23.82), log-log
    assert 17.07 < mid < 23.82
    assert latency_at(run, 3) is None and latency_at(run, 2**40) is None


def test_harness_output_from_a_real_h200():
    """allreduce_bench.py on one H200 (torch 2.11, NCCL 2.28.9): NCCL's INFO lines interleave the table."""
    from .conftest import FIXTURES

    text = (FIXTURES / "h200-1gpu-allreduce-bench-nccl-2.28.9-graph10.txt").read_text()
    run = parse_all_reduce(text)
    assert run.tool == "allreduce_bench" and run.nccl_version == "2.28.9" and run.ngpus == 1
    assert [r.size for r in run.rows] == [14336, 43008, 229376, 688128]
    log = parse_nccl_debug(text)
    assert log.version == "2.28.9+cuda13.0"
    assert log.env_by_pid("NCCL_NVLS_ENABLE") == {460: "0"}  # "set by environment to 0." — period stripped
