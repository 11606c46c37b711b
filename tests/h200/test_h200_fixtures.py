"""Parsers on real H200 outputs (issue #11), and the simulated host's stand-in nvidia-smi read into the same fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdoctor.parsers import nvidia_smi as smi
from specdoctor.parsers.nccl import NcclTestsRun, latency_at, parse_all_reduce, parse_nccl_tests_json
from specdoctor.sim import open_sim_host

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "h200"
ALLREDUCE_JSON = ROOT / "benchmarks" / "results" / "h200" / "allreduce.json"

QUERY_FIELDS = ["index", "name", "uuid", "pci.bus_id", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
                "power.limit", "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current",
                "pcie.link.width.max", "persistence_mode", "memory.total"]
QUERY_ARGV = ["nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv"]
NUMERIC = ["index", "clocks.sm", "clocks.max.sm", "clocks.mem", "power.limit", "pcie.link.gen.current",
           "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max", "memory.total"]
UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BUS = re.compile(r"^[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")

SIZES = [1024, 2048, 4096, 8192, 14336, 16384, 32768, 65536, 131072, 262144, 1048576, 4194304, 8388608]
INPLACE_US = {
    "allreduce_table.txt": [26.79, 24.69, 25.68, 26.35, 28.15, 26.08, 23.53, 24.80, 24.67, 22.50, 23.23, 23.41, 26.32],
    "allreduce_table_eager.txt": [24.18, 23.00, 26.68, 27.95, 33.46, 26.65, 28.54, 23.38, 23.83, 22.76, 24.45, 23.52,
                                  25.07],
}


def _read(name: str) -> str:
    return (H200 / name).read_text(encoding="utf-8")


def _unit(cell: str | None) -> str:
    """'345 MHz' -> 'MHz', '5' -> '': the unit a value carries, which the sim must carry too."""
    return re.sub(r"^\s*-?[0-9.]+\s*", "", cell or "")


def _set_fields(gpu: smi.QGpu) -> set[str]:
    """Scalar QGpu fields that the parser filled (lists are checked by type: the H200 had no processes)."""
    return {k for k, v in gpu.model_dump().items() if v is not None and not isinstance(v, list)}


@pytest.fixture(scope="module")
def sim_smi() -> dict[str, str]:
    """Stdout of the seed box's stand-in nvidia-smi for each command the H200 fixtures come from."""
    with open_sim_host("seed") as host:
        cmds = {"L": ["nvidia-smi", "-L"], "query": QUERY_ARGV, "q": ["nvidia-smi", "-q"],
                "topo": ["nvidia-smi", "topo", "-m"]}
        return {k: host.run(argv).stdout for k, argv in cmds.items()}


# --- the real H200 files ------------------------------------------------------------------------------------------

def test_list_is_one_h200():
    gpus = smi.parse_list(_read("nvidia-smi-L.txt"))
    assert [(g.index, g.name, g.uuid) for g in gpus] == [(0, "NVIDIA H200", "GPU-8c5e1e7c-258c-c9e3-d0de-8e5516a4a128")]


def test_query_csv_with_header_and_units():
    text = _read("nvidia-smi-query.csv")
    rows = smi.parse_query_csv(text, QUERY_FIELDS)
    assert len(rows) == 1  # the header row is skipped, the one GPU kept
    r = rows[0]
    assert (r["name"], r["driver_version"], r["pci.bus_id"]) == ("NVIDIA H200", "580.159.04", "00000000:00:06.0")
    assert r["persistence_mode"] == "Enabled"
    assert [smi.number(r[f]) for f in ("pcie.link.gen.current", "pcie.link.gen.max")] == [5.0, 5.0]
    assert [smi.number(r[f]) for f in ("pcie.link.width.current", "pcie.link.width.max")] == [16.0, 16.0]
    assert smi.number(r["power.limit"]) == 700.0 and _unit(r["power.limit"]) == "W"
    assert smi.number(r["clocks.max.sm"]) == 1980.0 and smi.number(r["memory.total"]) == 143771.0


def test_compute_apps_header_only_means_no_processes():
    text = _read("nvidia-smi-apps.csv")
    assert text.startswith("pid, process_name, used_gpu_memory [MiB]")
    assert smi.parse_query_csv(text, ["pid", "process_name", "used_memory"]) == []


def test_q_header_and_gpu_section():
    q = smi.parse_q(_read("nvidia-smi-q.txt"))
    assert (q.driver, q.cuda) == ("580.159.04", "13.0")
    assert len(q.gpus) == 1
    g = q.gpus[0]
    assert (g.bus_id, g.name, g.uuid) == ("00000000:00:06.0", "NVIDIA H200", "GPU-8c5e1e7c-258c-c9e3-d0de-8e5516a4a128")
    assert g.persistence_mode == "Enabled"
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == (5, 5, 16, 16)
    assert (g.sm_clock_mhz, g.mem_clock_mhz, g.max_sm_clock_mhz, g.app_sm_clock_mhz) == (345.0, 3201.0, 1980.0, 1980.0)
    assert (g.power_limit_w, g.default_power_limit_w) == (700.0, 700.0)
    assert g.process_pids == [] and g.process_names == []  # 'Processes : None'


def test_topo_single_gpu_with_ansi_header():
    raw = _read("nvidia-smi-topo-m.txt")
    assert "\x1b[4m" in raw and "\x1b[0m" in raw  # the real header is underlined: the parser must strip it
    assert "\x1b" not in smi.strip_ansi(raw)
    topo = smi.parse_topo(raw)
    assert topo.devices == ["GPU0"] and topo.gpus == ["GPU0"]
    assert topo.links == {"GPU0": {}} and topo.link_kinds() == {}
    assert (topo.cpu_affinity, topo.numa_affinity, topo.gpu_numa_id) == ({"GPU0": "0-15"}, {"GPU0": "0"},
                                                                        {"GPU0": None})


@pytest.mark.parametrize("name", sorted(INPLACE_US))
def test_allreduce_bench_tables(name: str):
    run = parse_all_reduce(_read(name))
    assert (run.collective, run.tool, run.ngpus, run.nthreads) == ("all_reduce", "allreduce_bench", 1, 1)
    assert run.graph == 0  # one rank: allreduce_bench.py does not capture a graph (an in-place 1-GPU all-reduce is a no-op)
    assert (run.nccl_version, run.out_of_bounds, run.avg_busbw) == ("2.28.9", 0, 0.0)
    assert [r.size for r in run.rows] == SIZES
    assert [r.count for r in run.rows] == [s // 2 for s in SIZES] and {r.dtype for r in run.rows} == {"bfloat16"}
    assert {r.redop for r in run.rows} == {"sum"} and {r.root for r in run.rows} == {-1}
    assert all(r.out_of_place is not None and r.out_of_place.time_us is None for r in run.rows)  # N/A columns
    assert [r.in_place.time_us for r in run.rows if r.in_place] == INPLACE_US[name]
    assert [r.time_us for r in run.rows] == INPLACE_US[name]
    assert {r.in_place.wrong for r in run.rows if r.in_place} == {0.0}
    assert latency_at(run, 14336) == INPLACE_US[name][4]


def test_allreduce_bench_json_matches_table_layout():
    run = parse_nccl_tests_json(ALLREDUCE_JSON.read_text(encoding="utf-8"))
    assert isinstance(run, NcclTestsRun) and run.source == "json"
    assert (run.collective, run.tool, run.ngpus, run.graph, run.nccl_version) == ("all_reduce", "allreduce_bench", 1,
                                                                                  0, "2.28.9")
    assert [r.size for r in run.rows] == SIZES
    times = [r.time_us for r in run.rows]
    assert all(t is not None and 10.0 < t < 40.0 for t in times)  # one GPU: a launch-bound ~20 µs at every size
    assert all(r.out_of_place is None for r in run.rows)


# --- the stand-in nvidia-smi reads into the same fields ---------------------------------------------------------

def test_sim_list_same_fields(sim_smi):
    real = smi.parse_list(_read("nvidia-smi-L.txt"))
    sim = smi.parse_list(sim_smi["L"])
    assert sim and [g.index for g in sim] == list(range(len(sim)))
    for g in [*real, *sim]:
        assert isinstance(g.name, str) and g.name and g.uuid and UUID.match(g.uuid)
    assert set(real[0].model_dump()) == set(sim[0].model_dump())


def test_sim_query_csv_same_header_fields_and_units(sim_smi):
    real_text = _read("nvidia-smi-query.csv")
    assert real_text.splitlines()[0] == sim_smi["query"].splitlines()[0]  # same column names and units
    real = smi.parse_query_csv(real_text, QUERY_FIELDS)
    sim = smi.parse_query_csv(sim_smi["query"], QUERY_FIELDS)
    assert len(sim) == len(smi.parse_list(sim_smi["L"])) > 1
    for row in [*real, *sim]:
        assert list(row) == QUERY_FIELDS
        missing = [f for f, v in row.items() if v is None]
        assert not missing, missing
        assert all(isinstance(smi.number(row[f]), float) for f in NUMERIC)
        assert UUID.match(row["uuid"] or "") and BUS.match(row["pci.bus_id"] or "")
        assert VERSION.match(row["driver_version"] or "") and row["persistence_mode"] in ("Enabled", "Disabled")
    for f in NUMERIC:
        assert {_unit(r[f]) for r in sim} == {_unit(real[0][f])}, f


def test_sim_q_same_fields(sim_smi):
    real = smi.parse_q(_read("nvidia-smi-q.txt"))
    sim = smi.parse_q(sim_smi["q"])
    assert isinstance(sim.driver, str) and VERSION.match(sim.driver)
    assert isinstance(sim.cuda, str) and VERSION.match(sim.cuda)
    assert len(sim.gpus) == len(smi.parse_list(sim_smi["L"])) > 1
    want = _set_fields(real.gpus[0])
    assert want == set(smi.QGpu.model_fields) - {"process_pids", "process_names"}  # the H200 fills every scalar
    for g in sim.gpus:
        assert _set_fields(g) == want, sorted(want - _set_fields(g))
        assert BUS.match(g.bus_id) and UUID.match(g.uuid or "")
        assert all(isinstance(v, int) for v in (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current,
                                                 g.pcie_width_max))
        assert all(isinstance(v, float) for v in (g.sm_clock_mhz, g.mem_clock_mhz, g.max_sm_clock_mhz,
                                                   g.app_sm_clock_mhz, g.power_limit_w, g.default_power_limit_w))
        assert all(isinstance(p, int) for p in g.process_pids) and len(g.process_names) == len(g.process_pids)
    assert any(g.process_pids for g in sim.gpus)  # the seed's server runs: the process list is read too


def test_sim_topo_same_fields(sim_smi):
    real_raw = _read("nvidia-smi-topo-m.txt")

    def trailing_columns(text: str) -> list[str]:
        head = smi.strip_ansi(text).splitlines()[0]
        return [c.strip() for c in head.split("\t") if c.strip() and not re.fullmatch(r"GPU\d+", c.strip())]

    assert trailing_columns(real_raw) == trailing_columns(sim_smi["topo"]) == ["CPU Affinity", "NUMA Affinity",
                                                                              "GPU NUMA ID"]
    real = smi.parse_topo(real_raw)
    sim = smi.parse_topo(sim_smi["topo"])
    assert len(sim.gpus) == len(smi.parse_list(sim_smi["L"])) > 1
    for topo in (real, sim):
        for attr in ("links", "cpu_affinity", "numa_affinity", "gpu_numa_id"):
            assert set(getattr(topo, attr)) == set(topo.gpus), attr
        assert all(isinstance(v, str) and re.fullmatch(r"[0-9,\-]+", v) for v in topo.cpu_affinity.values())
        assert all(isinstance(v, str) and v.isdigit() for v in topo.numa_affinity.values())
    assert real.gpu_numa_id == {"GPU0": None} and set(sim.gpu_numa_id.values()) == {None}  # both print N/A
    assert all(set(row) == set(sim.gpus) - {g} for g, row in sim.links.items())  # every pair has a link kind
