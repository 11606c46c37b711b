"""Real outputs of a second GPU model, read by parsers that had never met them (tests/fixtures/sglang-0.5.17-h100/):
an H100's nvidia-smi (table, -q, compute apps) while a real SGLang 0.5.17 EAGLE-3 server held it, and the server's
log. Every expected value below was read by hand from the files; the parsers were not changed for them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from specdoctor.parsers.nvidia_smi import parse_q, parse_query_csv
from specdoctor.parsers.nvidia_smi_table import parse_smi_table
from specdoctor.parsers.sglang import parse_decode_lines
from specdoctor.parsers.sglang_startup import parse_startup

H100 = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h100"
PID = {"clean": 758, "stalled": 1509}


@pytest.mark.parametrize("server", ["clean", "stalled"])
def test_the_table_reads_the_h100_and_the_scheduler_holding_it(server):
    t = parse_smi_table((H100 / server / "nvidia-smi.txt").read_text())
    assert (t.driver, t.cuda, t.problems) == ("580.159.04", "13.0", [])
    (g,) = t.gpus
    assert (g.name, g.bus_id, g.perf, g.power_w, g.power_cap_w) == ("NVIDIA H100 80GB HBM3", "00000000:00:06.0",
                                                                     "P0", 129.0, 700.0)
    assert (g.memory_used_mib, g.memory_total_mib, g.util_pct, g.mig_mode) == (28872, 81559, 0, "Disabled")
    (p,) = t.processes
    assert (p.pid, p.name, p.memory_mib) == (PID[server], "sglang::scheduler", 28862)


@pytest.mark.parametrize("server", ["clean", "stalled"])
def test_q_reads_clocks_link_and_power(server):
    q = parse_q((H100 / server / "nvidia-smi-q.txt").read_text())
    (g,) = q.gpus
    assert (g.name, g.persistence_mode, g.pcie_gen_current, g.pcie_width_current) == (
        "NVIDIA H100 80GB HBM3", "Enabled", 5, 16)
    assert (g.sm_clock_mhz, g.max_sm_clock_mhz, g.app_sm_clock_mhz, g.mem_clock_mhz) == (1980.0, 1980.0, 1980.0,
                                                                                           2619.0)
    assert (g.power_limit_w, g.default_power_limit_w) == (700.0, 700.0)


def test_the_compute_apps_csv_names_the_scheduler():
    text = (H100 / "clean" / "nvidia-smi-apps.csv").read_text().split("\n", 1)[1]
    assert parse_query_csv(text, ["pid", "process_name", "used_memory"]) == [
        {"pid": "758", "process_name": "sglang::scheduler", "used_memory": "28862 MiB"}]


@pytest.mark.parametrize("server, lines, first_tps, verify_graph_s", [("clean", 13, 11.34, 33.66),
                                                                       ("stalled", 13, 25.6, 1.41)])
def test_the_server_log_gives_decode_lines_and_startup(server, lines, first_tps, verify_graph_s):
    log = (H100 / server / "server.log").read_text()
    dl = parse_decode_lines(log)
    assert len(dl) == lines == log.count("Decode batch")
    assert {(d.accept_len, d.graph, d.running_req) for d in dl} == {(3.0, True, 1)}
    assert dl[0].gen_throughput == first_tps
    st = parse_startup(log)
    assert st.models_loaded == ["LlamaForCausalLM", "LlamaForCausalLMEagle3"] and st.problems == []
    assert st.cuda_graphs["target verify"] == verify_graph_s  # 33.66 s: the first start compiled Triton kernels
    assert st.ready_at is not None and st.ready_at > st.load_end_at > st.first_at >= datetime(2026, 12, 5)
