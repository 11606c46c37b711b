"""A real SGLang 0.5.17 EAGLE-3 server started with `--disable-cuda-graph` on an H100 (the sixth contact's
launch-flag story, tests/fixtures/sglang-0.5.17-h100/no-cuda-graph/): its log holds the user's start, the decode
lines of specdoctor's runs, a SIGTERM, and specdoctor's restart appended to the same file. Outputs the parsers had
never met (no graph captured, `cuda graph: False` on every line, two starts in one log); every value below was read
by hand from the files, and the parsers were not changed for them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from specdoctor.parsers.nvidia_smi_table import parse_smi_table
from specdoctor.parsers.sglang import parse_decode_lines
from specdoctor.parsers.sglang_startup import parse_startup

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-0.5.17-h100" / "no-cuda-graph"
LOG = (HERE / "server.log").read_text()


def test_every_decode_line_says_no_graph():
    lines = parse_decode_lines(LOG)
    assert len(lines) == 78 == LOG.count("Decode batch")
    assert {(d.accept_len, d.graph, d.running_req) for d in lines} == {(3.0, False, 1)}
    assert lines[0].gen_throughput == 4.76 and lines[1].gen_throughput == 184.78  # after idle, then steady


def test_startup_reads_the_running_start_with_no_graph_captured():
    st = parse_startup(LOG)  # the restart appended last: the start of the server running now
    assert st.ready_at == datetime(2026, 12, 6, 0, 3, 31) and st.problems == []
    assert st.models_loaded == ["LlamaForCausalLM", "LlamaForCausalLMEagle3"]
    assert st.cuda_graphs == {} and st.cuda_graph_s == 0.0
    assert (st.engine_timings["load_weight"], st.engine_timings["scheduler_e2e"]) == (0.09, 3.33)
    first = parse_startup(LOG[:LOG.index("SIGTERM received")])  # the user's own start, before specdoctor's stop
    assert first.ready_at == datetime(2026, 12, 5, 23, 55, 45) and first.engine_timings["scheduler_e2e"] == 3.44


def test_the_table_after_the_restart_shows_the_scheduler_back():
    t = parse_smi_table((HERE / "nvidia-smi.txt").read_text())
    assert (t.driver, t.cuda, t.problems) == ("580.159.04", "13.0", [])
    (g,) = t.gpus
    assert (g.name, g.perf, g.power_w, g.power_cap_w) == ("NVIDIA H100 80GB HBM3", "P0", 128.0, 700.0)
    assert (g.memory_used_mib, g.memory_total_mib) == (28770, 81559)
    (p,) = t.processes
    assert (p.pid, p.name, p.memory_mib) == (19880, "sglang::scheduler", 28760)
