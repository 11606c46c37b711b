"""SGLang and nvidia-smi parsers on real samples (copied under tests/fixtures/samples)."""

from __future__ import annotations

import pytest

from specdoctor.parsers.nvidia_smi import parse_list, parse_q, parse_query_csv, parse_topo
from specdoctor.parsers.sglang import (
    BodyError,
    drop_speculative_flags,
    normalise_meta_info,
    normalise_server_info,
    parse_body,
    parse_decode_lines,
    parse_launch_command,
)

from .helpers import sample


def test_launch_kimi_k25_long_flags():
    a = parse_launch_command(sample("sglang-launch/eagle3-kimi-k25-tp8-h200-2026-03.txt"))
    assert (a.entry, a.tp_size, a.port, a.host) == ("launch_server", 8, 30012, "0.0.0.0")
    assert a.model_path == "/models/Kimi-K25" and a.speculative_algorithm == "EAGLE3"
    assert a.speculative_draft_model_path == "AQ-MedAI/Kimi-K25-eagle3"
    assert (a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens) == (3, 1, 4)
    assert a.extra["mem_fraction_static"] == 0.9 and a.extra["trust_remote_code"] is True
    assert a.python == "python3" and a.speculative


def test_launch_abbreviations_and_equals():
    a = parse_launch_command(sample("sglang-launch/eagle3-llama33-70b-tp8-abbrev-maintainer-2025-03.txt"))
    assert a.tp_size == 8 and a.cuda_graph_max_bs == 1 and a.model_path == "meta-llama/Llama-3.3-70B-Instruct"
    assert a.speculative_draft_model_path == "/sgl-workspace/EAGLE3-LLaMA3.3-Instruct-70B"
    assert a.speculative_algorithm == "EAGLE3" and a.extra["dtype"] == "float16"
    assert any("ambiguous" in p for p in a.problems)  # --speculative-draft is ambiguous in newer SGLang
    b = parse_launch_command(sample("sglang-launch/eagle-2025-01-ci-abbreviated-flags-port-equals.txt"))
    assert b.port == 30020 and b.extra["mem_fraction_static"] == 0.7 and b.speculative_num_draft_tokens == 64
    c = parse_launch_command(sample("sglang-launch/nextn-deepseek-v3-bf16-tp8-abbrev-user-2025-02.txt"))
    assert c.speculative_algorithm == "NEXTN" and c.extra["disable_radix_cache"] is True and c.tp_size == 8
    d = parse_launch_command(sample("sglang-launch/eagle-qwq32b-tp2-fa3-torchcompile-user-2025-04.txt"))
    assert d.tp_size == 2 and d.attention_backend == "fa3" and d.port == 9123 and d.cuda_graph_max_bs == 8


def test_launch_bare_flag_list_and_disable_cuda_graph():
    a = parse_launch_command(sample("sglang-launch/eagle-kimi-k26-h20-flag-list-no-command-2026.txt"))
    assert a.entry == "bare" and a.tp_size == 8 and a.extra["ep_size"] == 8 and a.port == 30000
    assert a.speculative_draft_model_path == "/app/models/kimi-k2.6-eagle3-mla"
    b = parse_launch_command(sample("sglang-launch/mtp-deepseek-v32-exp-tp8-no-draft-path-2025-09.txt"))
    assert b.disable_cuda_graph and b.speculative_draft_model_path is None


def test_launch_0523_spellings_env_prefix_and_serve():
    a = parse_launch_command("NCCL_P2P_LEVEL=SYS env NCCL_PROTO=LL sglang serve --model-path /m "
                             "--tensor-parallel-size 4 --cuda-graph-max-bs-decode 48 "
                             "--cuda-graph-backend-decode disabled --port=31000")
    assert a.entry == "serve" and a.env == {"NCCL_P2P_LEVEL": "SYS", "NCCL_PROTO": "LL"}
    assert a.tp_size == 4 and a.cuda_graph_max_bs == 48 and a.disable_cuda_graph and a.port == 31000


def test_drop_speculative_flags_keeps_everything_else():
    text = sample("sglang-launch/eagle-2025-01-ci-abbreviated-flags-port-equals.txt")
    base = drop_speculative_flags(text)
    assert base == ["python3", "-m", "sglang.launch_server", "--model", "meta-llama/Llama-2-7b-chat-hf",
                    "--mem-fraction", "0.7", "--port=30020"]
    spec = parse_launch_command(sample("sglang-launch/eagle3-kimi-k25-tp8-h200-2026-03.txt"))
    assert not parse_launch_command(drop_speculative_flags(spec.argv)).speculative
    assert drop_speculative_flags(["--tp", "2", "--speculative-algorithm=EAGLE", "--port", "1"]) == \
        ["--tp", "2", "--port", "1"]


def test_decode_lines_across_versions():
    lines = parse_decode_lines(sample("sglang-logs/v0.5.5-2025-11-comma-form-cudagraph-false-above-max-bs.txt"))
    assert [ln.graph for ln in lines[:3]] == [False, False, True]
    assert lines[0].running_req == 46 and lines[0].gen_throughput == 1447.08 and lines[0].queue_req == 0
    old = parse_decode_lines(sample("sglang-logs/v0.5-2025-09-tp0-decode-cudagraph-trailing-comma.txt"))
    assert old[1].gen_throughput == 84.20 and old[1].rank == "TP0" and old[1].time == "2025-09-03 18:33:19"
    npu = parse_decode_lines(sample("sglang-logs/v0.5.x-2026-07-ascend-npu-hybrid-mamba-mtp.txt"))
    assert npu[-1].accept_len == 3.13 and npu[-1].accept_rate == 0.71 and npu[-1].graph is True
    eagle = parse_decode_lines(sample("sglang-logs/v0.4.2-2025-01-ci-eagle-llama2-torchcompile-startup-decode.txt"))
    assert eagle and eagle[0].accept_len == 4.05 and eagle[0].graph is None
    v02 = parse_decode_lines(sample("sglang-logs/v0.2-2024-08-time-only-decode-batch-period.txt"))
    assert v02 and all(ln.gen_throughput is not None for ln in v02)


def test_bodies_repr_json_html():
    info = normalise_server_info(parse_body(sample("sglang-json/get_server_info-2024-11-python-repr-v0.3.x.txt")))
    assert info.port == 30010 and info.attention_backend == "flashinfer" and info.cuda_graph_max_bs == 160
    assert info.disable_cuda_graph is False and info.tp_size == 1
    meta = normalise_meta_info(parse_body(sample("sglang-json/generate-2026-04-python-repr-meta_info.txt"))["meta_info"])
    assert meta.completion_tokens == 128 and meta.retractions == 0 and abs(meta.e2e_latency - 1.0213) < 1e-3
    old = normalise_meta_info(parse_body(sample("sglang-json/generate-2024-11-raw-json-meta_info-v0.3.x.txt"))["meta_info"])
    assert old.completion_tokens == 128 and old.finish_reason == "length"
    new = normalise_server_info({"version": "0.5.23", "tp_size": 8, "cuda_graph_max_bs_decode": 48,
                                 "cuda_graph_backend_decode": "full", "speculative_algorithm": "eagle3",
                                 "internal_states": [{"avg_spec_accept_length": 2.1, "last_gen_throughput": 60.5}]})
    assert new.cuda_graph_max_bs == 48 and new.accept_length == 2.1 and new.speculative_algorithm == "EAGLE3"
    assert new.disable_cuda_graph is None
    for bad in ("<!DOCTYPE html><html><title>502 Bad Gateway</title></html>", "", "{'a': "):
        with pytest.raises(BodyError):
            parse_body(bad)


def test_nvidia_smi_list_query_q():
    assert [g.name for g in parse_list(sample("nvidia-smi-q/L-4x-rtx3090-with-prompt.txt"))] == \
        ["NVIDIA GeForce RTX 3090"] * 4
    q = parse_q(sample("nvidia-smi-q/2x-h100-nvl-q-full.txt"))
    assert q.driver == "550.54.14" and q.cuda == "12.4" and len(q.gpus) == 2
    g = q.gpus[0]
    assert (g.name, g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current) == ("NVIDIA H100 NVL", 5, 5, 16)
    assert (g.power_limit_w, g.max_sm_clock_mhz, g.sm_clock_mhz, g.persistence_mode) == (310.0, 1785.0, 345.0,
                                                                                          "Enabled")
    idle = parse_q(sample("nvidia-smi-q/8x-rtx4090-q-full-driver550.txt"))
    assert len(idle.gpus) == 8 and idle.gpus[0].pcie_gen_current == 1 and idle.gpus[0].pcie_gen_max == 4
    old = parse_q(sample("nvidia-smi-q/h800-q-i0-driver525.txt"))
    assert old.driver == "525.105.17" and old.gpus and old.gpus[0].power_limit_w is not None
    kepler = parse_q(sample("nvidia-smi-q/1x-gtx680-q-full-driver470.txt"))
    assert kepler.gpus[0].pcie_gen_max is None  # N/A stays unknown
    rows = parse_query_csv("0, NVIDIA H200, 1980, [N/A]\n1, NVIDIA H200, 1980, 700.00\n",
                           ["index", "name", "clocks.sm", "power.limit"])
    assert rows[0]["power.limit"] is None and rows[1]["power.limit"] == "700.00"


def test_topology_variants():
    t = parse_topo(sample("nvidia-smi-topo/8x-h100-nv18-9nic-tabs-EXCERPT.txt"))
    assert t.gpus == [f"GPU{i}" for i in range(8)] and t.link_kinds() == {"NV18": 28}
    assert t.links["GPU0"]["NIC8"] == "PIX" and t.cpu_affinity["GPU4"] == "80-159" and t.numa_affinity["GPU4"] == "1"
    fused = parse_topo(sample("nvidia-smi-topo/sglang-check-env-8gpu-nv18-collapsed-tabs-EXCERPT.txt"))
    assert fused.cpu_affinity["GPU0"] == "0-47,96-143" and fused.numa_affinity["GPU0"] == "0"
    pcie = parse_topo(sample("nvidia-smi-topo/8gpu-pcie-pix-phb-sys-2numa-with-prompt.txt"))
    assert pcie.link_kinds() == {"PIX": 4, "PHB": 8, "SYS": 16}
    v100 = parse_topo(sample("nvidia-smi-topo/4x-v100-dell-c4140-nv2-mlx5-column-comma-cpulist.txt"))
    assert v100.cpu_affinity["GPU0"] == "0,2,4,6,8,10" and v100.links["GPU0"]["mlx5_0"] == "NODE"
    two = sample("nvidia-smi-topo/2gpu-mangled-indented-wrapped-legend-plus-p2p.txt")
    coloured = two.replace("NODE", "\x1b[1;33mNODE\x1b[0m")
    assert parse_topo(coloured).links["GPU0"] == {"GPU1": "NODE"}  # the p2p matrix after it is ignored
