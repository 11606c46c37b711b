"""Every real sample under tests/fixtures/real, with the values a reader sees in the text asserted."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.nccl import parse_nccl_debug
from specdoctor.parsers.nvidia_smi_table import parse_smi_table
from specdoctor.parsers.sglang import (
    normalise_meta_info,
    normalise_server_info,
    parse_body,
    parse_decode_lines,
    parse_launch_command,
)
from specdoctor.parsers.sglang_bench import (
    parse_bench_one_batch_server,
    parse_bench_serving,
    parse_eagle_bench_lines,
)
from specdoctor.parsers.sglang_check_env import parse_check_env
from specdoctor.parsers.sglang_server_args import parse_server_args

from .helpers import REAL, real, real_files


def test_every_sample_names_its_source_and_is_tested():
    files = real_files()
    assert len(files) >= 40
    tested = "".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("test_*.py"))
    for rel in files:
        head = (REAL / rel).read_text(encoding="utf-8").splitlines()[0]
        assert head.startswith("# source: https://github.com/"), rel
        assert rel.split("/", 1)[1] in tested, f"{rel} has no test"


# -- plain nvidia-smi table ------------------------------------------------------------------------------

def test_smi_old_layout_titan_xp():
    t = parse_smi_table(real("nvidia-smi-table/nvgpu-pr15-titan-xp-450.57-old-layout.txt"))
    assert (t.smi_version, t.driver, t.cuda, t.layout) == ("450.57", "450.57", "11.0", "old")
    (g,) = t.gpus
    assert (g.index, g.name, g.persistence, g.bus_id, g.display_active) == (0, "TITAN Xp", "On", "00000000:17:00.0",
                                                                             "Off")
    assert (g.fan_pct, g.temp_c, g.perf, g.power_w, g.power_cap_w) == (23, 39, "P8", 9.0, 250.0)
    assert (g.memory_used_mib, g.memory_total_mib, g.util_pct, g.compute_mode, g.mig_mode) == (7, 12196, 0,
                                                                                               "Default", "N/A")
    assert g.ecc_errors == "N/A" and not t.processes


def test_smi_410_no_cuda_clipped_name():
    t = parse_smi_table(real("nvidia-smi-table/diamorphine-issue13-v100-dgxs-410.48-no-cuda-clipped-name-EXCERPT.txt"))
    assert (t.driver, t.cuda, t.layout) == ("410.48", None, "old")
    (g,) = t.gpus
    assert g.name == "Tesla V100-DGXS" and g.name_clipped and g.persistence == "Off" and g.fan_pct is None
    assert (g.temp_c, g.power_w, g.power_cap_w, g.memory_used_mib, g.memory_total_mib) == (38, 49.0, 300.0, 449, 32478)
    assert g.mig_mode is None and g.ecc_errors == "0"


@pytest.mark.parametrize("rel,driver,cuda,name,used,total,watts,cap,ecc", [
    ("wyoming-piper-pr20-tesla-p4-550.135-EXCERPT.txt", "550.135", "12.4", "Tesla P4", 7719, 8192, 24.0, 75.0, "Off"),
    ("speaches-pr438-l4-570.133.20-EXCERPT.txt", "570.133.20", "12.8", "NVIDIA L4", 0, 23034, 16.0, 72.0, "0"),
])
def test_smi_new_layout_single_gpu(rel, driver, cuda, name, used, total, watts, cap, ecc):
    t = parse_smi_table(real(f"nvidia-smi-table/{rel}"))
    assert (t.driver, t.cuda, t.layout) == (driver, cuda, "new")
    (g,) = t.gpus
    assert (g.name, g.memory_used_mib, g.memory_total_mib, g.power_w, g.power_cap_w, g.ecc_errors) == (
        name, used, total, watts, cap, ecc)
    assert g.mig_mode == "N/A" and g.fan_pct is None


def test_smi_two_rtx4090():
    t = parse_smi_table(real("nvidia-smi-table/rlinf-issue255-2x-rtx4090-550.163.01-EXCERPT.txt"))
    assert t.driver == "550.163.01" and [g.index for g in t.gpus] == [0, 1]
    assert [g.bus_id for g in t.gpus] == ["00000000:4E:00.0", "00000000:4F:00.0"]
    assert [g.memory_used_mib for g in t.gpus] == [507, 459] and [g.power_w for g in t.gpus] == [22.0, 21.0]
    assert all(g.fan_pct == 30 and g.persistence == "Off" and g.power_cap_w == 450.0 for g in t.gpus)


def test_smi_wsl_driver_differs_from_smi_version():
    t = parse_smi_table(real("nvidia-smi-table/nvmolkit-issue28-wsl-580-smi-vs-581-driver-cuda13-EXCERPT.txt"))
    assert (t.smi_version, t.driver, t.cuda) == ("580.95.02", "581.42", "13.0")
    assert t.gpus[0].name == "NVIDIA RTX A4500 Laptop GPU" and t.gpus[0].power_cap_w == 91.0


def test_smi_block_cut_after_its_first_line():
    t = parse_smi_table(real("nvidia-smi-table/sonar-issue247-h100-pcie-mig-node-prompt-EXCERPT.txt"))
    assert (t.driver, t.cuda) == ("570.124.06", "12.8")
    (g,) = t.gpus
    assert (g.name, g.bus_id, g.ecc_errors) == ("NVIDIA H100 PCIe", "00000000:C1:00.0", "On")
    assert g.perf is None and g.memory_total_mib is None  # its second line is not in the paste: nothing invented


def test_smi_processes_old_and_new_rows():
    old = parse_smi_table(real("nvidia-smi-table/gpustat-issue1-2016-process-row-no-gi-ci.txt"))
    (p,) = old.processes
    assert (p.gpu, p.gi, p.ci, p.pid, p.type, p.name, p.memory_mib) == (0, None, None, 11812, "C", "./juspic.x", 96)
    new = parse_smi_table(real("nvidia-smi-table/nvitop-issue152-processes-clipped-names-gi-ci-na.txt"))
    assert [(p.gpu, p.pid, p.type, p.memory_mib) for p in new.processes] == [
        (0, 10734, "C", 160), (0, 58661, "G", 3), (1, 10734, "C", 160), (2, 18243, "G", 64), (2, 22720, "G", 34)]
    assert new.processes[3].name == "/usr/bin/X" and new.processes[0].gi == "N/A"


def test_smi_table_is_not_read_by_q_parser_and_vice_versa():
    from specdoctor.parsers.nvidia_smi import parse_q
    text = real("nvidia-smi-table/speaches-pr438-l4-570.133.20-EXCERPT.txt")
    assert parse_q(text).gpus == []  # the -q parser must not invent GPUs from a table
    assert parse_smi_table(real("check_env/issue8669-eagle3-8x-h100-no-topology.txt")).gpus == []


# -- check_env --------------------------------------------------------------------------------------------

def test_check_env_8x_a100_with_topology():
    e = parse_check_env(real("check_env/pr965-8x-a100-nv12-4nic-prompt-EXCERPT.txt"))
    assert e.python == "3.10.12" and e.cuda_available is True
    assert e.gpus == {i: "NVIDIA A100-SXM4-80GB" for i in range(8)} and e.compute_capability[7] == "8.0"
    assert (e.nvcc, e.driver, e.sglang, e.torch) == ("12.1", "550.90.07", "0.2.10", "2.3.1+cu121")
    assert e.packages["flashinfer"] == "0.1.3" and e.packages["vllm"] == "0.5.3.post1"
    t = e.topology
    assert t is not None and t.devices[-4:] == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert t.links["GPU0"]["GPU7"] == "NV12" and t.links["GPU1"]["NIC2"] == "SYS"
    assert t.cpu_affinity["GPU0"] == "0-63,128-191" and t.numa_affinity["GPU1"] == "0" and not t.truncated


def test_check_env_single_a40_after_warning_lines():
    e = parse_check_env(real("check_env/issue2805-1x-a40-6nic-pydantic-warning-EXCERPT.txt"))
    assert e.gpus == {0: "NVIDIA A40"} and e.compute_capability == {0: "8.6"}
    assert (e.python, e.driver, e.sglang, e.nvcc) == ("3.11.5", "535.104.12", "0.4.0.post2", "12.1")
    assert e.topology is not None and e.topology.links["GPU0"]["NIC2"] == "PIX"
    assert e.topology.links["NIC1"]["NIC0"] == "PIX" and e.topology.cpu_affinity["GPU0"] == "0-31,64-95"


def test_check_env_first_version_tabs_and_missing_module():
    e = parse_check_env(real("check_env/pr645-first-check_env-1x-a100-tabs-module-not-found-legend-EXCERPT.txt"))
    assert e.sglang == "0.1.21" and e.compute_capability == {} and "pillow" in e.missing
    assert e.topology is not None and e.topology.cpu_affinity["GPU0"] == "32-63,96-127"
    assert e.topology.numa_affinity["GPU0"] == "1" and e.topology.gpu_numa_id["GPU0"] is None  # 'N/A'
    assert "GPU NUMA ID" in e.fields or e.topology.gpu_numa_id == {"GPU0": None}
    assert e.topology.links["GPU0"]["NIC3"] == "PXB"


def test_check_env_stray_value_line_is_ignored():
    e = parse_check_env(real("check_env/pr661-2x-a100-stray-driver-line-tabs-EXCERPT.txt"))
    assert e.driver == "535.54.03" and e.gpus == {0: "NVIDIA A100-SXM4-80GB", 1: "NVIDIA A100-SXM4-80GB"}
    assert e.topology is not None and e.topology.link_kinds() == {"NV12": 1}
    assert e.topology.links["GPU1"]["NIC2"] == "PXB"


def test_check_env_module_not_found_and_prompt():
    e = parse_check_env(real("check_env/issue5389-flashinfer-module-not-found-prompt-8x-a100-EXCERPT.txt"))
    assert e.nvcc == "11.7" and e.torch == "2.5.1+cu124" and e.packages["sgl_kernel"] == "0.0.8"
    assert {"flashinfer", "multipart", "zmq"} <= set(e.missing) and "flashinfer" not in e.packages
    assert e.topology is not None and e.topology.gpus == [f"GPU{i}" for i in range(8)]
    assert set(e.topology.cpu_affinity) == {"GPU0", "GPU1"}  # rows after GPU1 were cut from the paste


def test_check_env_without_topology():
    e = parse_check_env(real("check_env/issue8669-eagle3-8x-h100-no-topology.txt"))
    assert e.topology is None and e.gpus[3] == "NVIDIA H100 80GB HBM3" and e.compute_capability[0] == "9.0"
    assert e.packages["flashinfer_python"] == "0.2.9rc2" and "vllm" in e.missing and e.sglang == "0.4.10"


def test_check_env_refuses_other_text():
    with pytest.raises(ParseError):
        parse_check_env(real("nvidia-smi-table/speaches-pr438-l4-570.133.20-EXCERPT.txt"))


# -- server_args=ServerArgs(...) -----------------------------------------------------------------------------

@pytest.mark.parametrize("rel,n_min,expect", [
    ("ci-2025-01-27-eagle-llama2-v0.4.2.txt", 90, dict(
        speculative_algorithm="EAGLE", speculative_draft_model_path="lmzheng/sglang-EAGLE-llama2-chat-7B",
        speculative_num_steps=5, speculative_eagle_topk=8, speculative_num_draft_tokens=64, port=30020,
        mem_fraction_static=0.7, cuda_graph_max_bs=160)),
    ("ci-2025-04-02-eagle3-llama31-v0.4.4.txt", 110, dict(
        speculative_algorithm="EAGLE3", speculative_num_draft_tokens=32, cuda_graph_max_bs=2,
        disable_cuda_graph=True, model_path="meta-llama/Llama-3.1-8B-Instruct")),
    ("ci-2025-07-08-mimo-mtp-v0.4.9.txt", 160, dict(
        speculative_algorithm="EAGLE", speculative_draft_model_path=None, speculative_num_steps=1,
        speculative_num_draft_tokens=2, model_path="XiaomiMiMo/MiMo-7B-RL")),
    ("ci-2026-04-05-qwen25-newest-key-set-v0.5.x.txt", 340, dict(
        speculative_algorithm=None, attention_backend="fa3", cuda_graph_bs=[1, 2, 4], tp_size=1)),
])
def test_server_args_across_versions(rel, n_min, expect):
    d = parse_server_args(real(f"server_args/{rel}"))
    assert not d.truncated and not d.non_literal and len(d.args) >= n_min
    for key, value in expect.items():
        assert d.args[key] == value, key
    assert d.speculative == (expect.get("speculative_algorithm") is not None)
    assert d.time and d.time.startswith(rel[3:13])


def test_server_args_cut_repr_is_marked_truncated():
    d = parse_server_args(real("server_args/issue12726-v0.5.4-ngram-lora-cut-EXCERPT.txt"))
    assert d.truncated and d.args["max_running_requests"] == 48 and d.args["max_total_tokens"] is None
    assert d.args["page_size"] == 1 and d.args["hybrid_kvcache_ratio"] is None and "speculative_algorithm" not in d.args
    assert d.args["model_loader_extra_config"] == "{}"


# -- benchmark output --------------------------------------------------------------------------------------

def test_vllm_bench_serve_is_told_apart():
    (r,) = parse_bench_serving(real("bench/vllm-pr18566-vllm-bench-serve-sharegpt-cut-closing-rule.txt"))
    assert r.layout == "vllm" and r.backend is None and r.complete
    assert (r.completed, r.duration, r.total_throughput, r.mean_tpot_ms, r.p99_itl_ms) == (1000, 30.85, 14029.44,
                                                                                          77.86, 214.35)
    (v,) = parse_bench_serving(real("bench/rocm-vllm-pr920-indented-failed-maxconc-EXCERPT.txt"))
    assert (v.layout, v.completed, v.failed, v.max_concurrency) == ("vllm", 10, 0, 1)
    (w,) = parse_bench_serving(real("bench/vllm-pr10880-tqdm-bar-glued-to-header-EXCERPT.txt"))
    assert (w.layout, w.completed, w.output_throughput, w.duration) == ("vllm", 128, 3025.13, 9.16)


def test_vllm_peak_rows_and_second_block():
    first, second = parse_bench_serving(real("bench/vllm-pr35714-peak-rows-two-blocks-EXCERPT.txt"))
    assert (first.layout, first.complete, first.failed, first.max_concurrency, first.total_throughput) == (
        "vllm", True, 0, 1, 47.35)
    assert first.metrics["peak_output_token_throughput_tok_s"] == 47.0 and first.mean_ttft_ms == 330.66
    assert (second.layout, second.completed, second.complete, second.duration) == ("vllm", 16, False, None)


def test_headless_block_is_not_invented():
    assert parse_bench_serving(real("bench/vllm-pr16780-headless-block-tail-then-namespace-EXCERPT.txt")) == []


def test_sglang_bench_serving_blocks():
    (a,) = parse_bench_serving(real("bench/sglang-pr9812-bench-serving-vllm-chat-backend-vision-EXCERPT.txt"))
    assert (a.layout, a.backend, a.request_rate, a.max_concurrency) == ("sglang", "vllm-chat", math.inf, None)
    assert (a.completed, a.total_output_tokens_retokenized, a.concurrency, a.mean_itl_ms) == (768, 768, 451.36, 0.0)
    assert a.metrics["total_input_vision_tokens"] == 769536
    (b,) = parse_bench_serving(real("bench/sglang-pr23753-gsp-max-concurrency-16-peak-EXCERPT.txt"))
    assert (b.layout, b.max_concurrency, b.input_throughput, b.output_throughput) == ("sglang", 16, 48308.77, 362.6)
    (c,) = parse_bench_serving(real("bench/sglang-issue6681-v0.4.3-reqeuest-typo-rate-128-EXCERPT.txt"))
    assert (c.request_rate, c.max_concurrency, c.completed, c.total_throughput) == (128.0, 512, 1024, 4107.36)
    assert c.mean_e2e_latency_ms is None  # the paste ends before its value
    (d,) = parse_bench_serving(real("bench/deepgemm-pr183-sglang-sbo-bs32-origin-EXCERPT.txt"))
    assert (d.request_rate, d.mean_e2e_latency_ms, d.p99_ttft_ms, d.p99_itl_ms) == (4.8, 112143.54, 2528.55, 150.6)
    assert d.metrics["p95_itl_ms"] == 89.53 and not d.complete


def test_bench_one_batch_lines_and_their_serving_block():
    text = real("bench/sglang-pr9428-fa4-bench-one-batch-serving-block-EXCERPT.txt")
    (row,) = parse_bench_one_batch_server(text)
    assert (row.batch_size, row.input_len, row.output_len, row.extra) == (64, 32768, 2, {})
    (r,) = parse_bench_serving(text)
    assert (r.completed, r.total_output_tokens, r.total_output_tokens_retokenized) == (64, 101, 89)
    assert (r.input_throughput, r.mean_ttft_ms, r.metrics["p95_itl_ms"]) == (137022.74, 7252.11, 13752.97)


def test_eagle_bench_lines_with_labels():
    lines = parse_eagle_bench_lines(real("bench/sglang-pr4247-eagle-mtbench-no-cuda-graph-unlabeled-steps.txt"))
    assert [(x.label, x.questions, x.throughput, x.accept_length) for x in lines] == [
        ("EAGLE-3", 80, 276.3, 5.36), ("EAGLE-2", 80, 224.7, 3.75)]


# -- launch lines --------------------------------------------------------------------------------------------

def test_launch_script_with_exports_variables_and_substitution():
    a = parse_launch_command(real("sglang_launch/pr13981-mhmtp-script-exports-vars-cmdsubst-redirect.txt"))
    assert a.env == {"CUDA_LAUNCH_BLOCKING": "1", "CUDA_VISIBLE_DEVICES": "4,5,6,7",
                     "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", "SGLANG_ENABLE_SPEC_V2": "0"}
    assert (a.model_path, a.port, a.tp_size) == ("MiniMaxAI/MiniMax-M2-MTP", 30000, 4)
    assert a.speculative_algorithm == "MHMTP" and (a.speculative_num_steps, a.speculative_num_draft_tokens) == (3, 4)
    assert a.unresolved == {} and a.extra["cuda_graph_bs"] == [1]  # $(seq -s ' ' 1 1), evaluated (#33)
    assert a.extra["chunked_prefill_size"] == -1 and a.extra["max_running_requests"] == 1
    assert a.extra["model_loader_extra_config"] == '{"enable_multithread_load": true, "num_threads": 32}'
    assert not any(t in a.argv for t in (">", "server.log", "2>&1")) and not any("stray" in p for p in a.problems)


def test_launch_env_prefix_on_its_own_continued_line():
    a = parse_launch_command(real("sglang_launch/pr23519-pythonpath-continued-env-standalone-draft.txt"))
    assert a.env == {"PYTHONPATH": "python"} and a.entry == "launch_server" and a.port == 7011
    assert a.speculative_algorithm == "STANDALONE" and a.attention_backend == "triton"
    assert a.speculative_draft_model_path == "/models/LLM-Research/Llama-3.2-1B-Instruct" and not a.problems


def test_launch_inline_command_with_long_tp_flag():
    a = parse_launch_command(real("sglang_launch/pr3582-nextn-r1-h20-inline-tensor-parallel-size.txt"))
    assert (a.tp_size, a.port, a.speculative_algorithm, a.speculative_num_steps) == (8, 8188, "NEXTN", 2)
    assert a.extra["served_model_name"] == "mozz" and a.extra["context_length"] == 32768
    assert a.speculative_draft_model_path == "/mntfn/open_model/deepseek/deepseek-nextn"


def test_launch_model_alias_and_abbreviation():
    a = parse_launch_command(real("sglang_launch/safeailab-eagle-issue298-qwen3-8b-eagle3-topk10-trailing-space.txt"))
    assert (a.model_path, a.speculative_eagle_topk, a.speculative_num_draft_tokens) == ("/models/Qwen3-8B", 10, 32)
    assert a.cuda_graph_max_bs == 2 and a.extra["mem_fraction_static"] == 0.9 and a.port == 30000


# -- Decode-batch lines --------------------------------------------------------------------------------------

def test_decode_lines_with_ray_actor_prefix():
    lines = parse_decode_lines(real("sglang_logs/openclaw-rl-issue44-ray-sglangengine-prefix-decode-comma-EXCERPT.txt"))
    assert len(lines) == 7 and all(ln.rank == "TP0" for ln in lines)
    assert lines[0].time == "2026-03-22 13:53:37" and lines[-1].time == "2026-03-22 13:53:38"
    assert (lines[0].running_req, lines[0].tokens, lines[0].graph, lines[0].gen_throughput) == (6, 42414, True,
                                                                                                1374.02)


def test_decode_lines_accept_rate_and_time_only_forms():
    spec = parse_decode_lines(real("sglang_logs/issue11948-eagle3-decode-accept-rate-trailing-comma-EXCERPT.txt"))
    assert [ln.accept_len for ln in spec] == [2.17, 1.95, 1.80, 2.05, 1.80]  # the 6th line was cut mid-way
    assert spec[1].accept_rate == 0.49 and spec[0].gen_throughput == 0.39 and spec[0].queue_req == 0
    old = parse_decode_lines(real("sglang_logs/issue1270-2024-time-only-tp0-decode-period-EXCERPT.txt"))
    assert len(old) == 10 and old[0].time == "04:40:55" and old[0].rank == "TP0" and old[0].gen_throughput == 447.31
    assert (old[-1].time, old[-1].running_req, old[-1].tokens, old[-1].gen_throughput) == ("04:40:57", 1, 4142, 239.0)
    mimo = parse_decode_lines(real("sglang_logs/ci-2025-07-08-mimo-mtp-decode-timestamp-field.txt"))
    assert [(ln.time, ln.rank, ln.accept_len, ln.graph, ln.gen_throughput) for ln in mimo] == [
        ("2025-07-08 21:11:38", None, 1.71, False, 9.92)]


# -- NCCL debug ----------------------------------------------------------------------------------------------

def test_nccl_bare_version_line():
    log = parse_nccl_debug(real("nccl_debug/nccl-issue1591-vllm-ray-bare-version-line-topology-EXCERPT.txt"))
    assert log.version == "2.21.5+cuda12.4" and len(log.lines) == 7
    assert {(ln.host, ln.pid, ln.device) for ln in log.lines} == {("gh-3714u06", 737, 0)}


def test_nccl_placeholder_host():
    log = parse_nccl_debug(real("nccl_debug/nccl-issue952-cluster-name-placeholder-host-EXCERPT.txt"))
    assert len(log.lines) == 18 and {ln.host for ln in log.lines} == {"<cluster_name>"}
    assert log.cuda_driver == 12010 and sorted({ln.pid for ln in log.lines}) == list(range(919, 927))
    assert {ln.tid for ln in log.lines if ln.pid == 924} == {924, 1152}


def test_nccl_ray_and_rank_label_prefixes():
    ray = parse_nccl_debug(real("nccl_debug/ray-issue59778-rayworkerwrapper-ip-prefix-set-by-env-EXCERPT.txt"))
    assert {(ln.host, ln.pid) for ln in ray.lines} == {("k8s19", 2361), ("k8s17", 581)}
    assert ray.env_by_pid("NCCL_MIN_P2P_NCHANNELS") == {581: "16"} and ray.env_by_pid("NCCL_NCHANNELS_PER_PEER")
    nested = parse_nccl_debug(real("nccl_debug/fastsafetensors-issue36-nested-enginecore-ray-prefix-spark2-EXCERPT.txt"))
    assert len(nested.lines) == 7 and {ln.host for ln in nested.lines} == {"spark2"}
    assert nested.lines[1].message.startswith("comm 0x1095e9d0 rank 1 nRanks 2")
    old = parse_nccl_debug(real("nccl_debug/nccl-issue302-nccl-2.5.6-bracket-rank-prefix-EXCERPT.txt"))
    assert len(old.lines) == 10 and {(ln.host, ln.device) for ln in old.lines} == {
        ("crow-ib-new-nccl-256-info-19", 3)}


# -- bodies -------------------------------------------------------------------------------------------------

def test_bodies_inside_one_inline_html_element():
    info = normalise_server_info(parse_body(real("sglang_json/ci-2025-03-03-get-server-info-json-in-strong-tag.txt")))
    assert (info.version, info.model_path, info.tp_size, info.attention_backend) == (
        "0.4.3.post2", "meta-llama/Llama-3.2-1B-Instruct", 1, "flashinfer")
    assert info.disable_cuda_graph is True and info.last_gen_throughput == pytest.approx(121.910, abs=1e-3)
    body = parse_body(real("sglang_json/ci-2025-03-03-generate-repr-in-strong-tag.txt"))
    meta = normalise_meta_info(body["meta_info"])
    assert (meta.prompt_tokens, meta.completion_tokens, meta.finish_reason) == (6, 32, "length")
    assert meta.e2e_latency == pytest.approx(0.4014, abs=1e-4) and body["meta_info"]["cached_tokens"] == 3
