"""vLLM 0.26 behind the engine seam: launch lines, titles, logs, /metrics, envs.py (samples built from its source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.host.base import HostHints
from specdoctor.host.mock import MockHost
from specdoctor.inference import VLLM, VLLM_0_26_0, InferenceEngine, engine_for_launch, get_engine
from specdoctor.inference.resolve import EngineUnknown
from specdoctor.toolkit import ToolContext

FIX = Path(__file__).parent.parent / "fixtures" / "vllm-0.26-constructed"
LINE = ("CUDA_VISIBLE_DEVICES=0,1 vllm serve /models/Llama-3.1-8B-Instruct -tp 2 --port 8011 "
        "--speculative-config '{\"method\": \"eagle3\", \"model\": \"/models/EAGLE3\", \"num_speculative_tokens\": 3, "
        "\"draft_tensor_parallel_size\": 1}' --gpu-memory-utilization 0.85")


def test_vllm_implements_the_protocol_and_is_registered():
    assert isinstance(VLLM(), InferenceEngine) and isinstance(VLLM_0_26_0, InferenceEngine)
    assert get_engine("vllm", "0.26.0").version == "0.26.0" and get_engine("vllm").name == "vllm"


def test_serve_line_with_speculative_json():
    a = get_engine("vllm").parse_launch(LINE)
    assert (a.entry, a.model_path, a.port, a.tp_size) == ("serve", "/models/Llama-3.1-8B-Instruct", 8011, 2)
    assert a.env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert (a.speculative_algorithm, a.speculative_draft_model_path) == ("eagle3", "/models/EAGLE3")
    assert (a.speculative_num_steps, a.speculative_num_draft_tokens) == (3, 4)
    assert a.extra["draft_tensor_parallel_size"] == 1 and a.extra["gpu_memory_utilization"] == "0.85"
    assert a.speculative and not a.disable_cuda_graph and not a.problems


def test_api_server_module_line_dotted_keys_and_eager():
    line = ("python3 -m vllm.entrypoints.openai.api_server --model /m --tensor-parallel-size=4 --enforce-eager "
            "--speculative-config.method eagle --speculative-config.model /d --speculative-config.num_speculative_tokens 2")
    a = get_engine("vllm").parse_launch(line)
    assert (a.entry, a.python, a.model_path, a.tp_size, a.port) == ("api_server", "python3", "/m", 4, 8000)
    assert (a.speculative_algorithm, a.speculative_draft_model_path, a.speculative_num_steps) == ("eagle", "/d", 2)
    assert a.disable_cuda_graph


@pytest.mark.parametrize("flags", ["-cc '{\"cudagraph_mode\": \"NONE\"}'", "-O0", "--enforce-eager"])
def test_cuda_graphs_off_in_any_spelling(flags):
    assert get_engine("vllm").parse_launch(f"vllm serve /m {flags}").disable_cuda_graph


def test_no_cuda_graph_flag_means_graphs_on():
    assert not get_engine("vllm").parse_launch("vllm serve /m -O3 -cc '{\"cudagraph_mode\": \"FULL\"}'").disable_cuda_graph


def test_baseline_drops_every_speculative_spelling_and_relaunch_forces_python_and_port():
    e = get_engine("vllm")
    for line in (LINE, "vllm serve /m --spec-method eagle3 --spec-model /d --spec-tokens 3 --port 8000",
                 "vllm serve /m --speculative-config={\"method\":\"eagle3\"} --port 8000"):
        base = e.drop_speculative(line)
        assert not e.parse_launch(base).speculative and "/m" in " ".join(base)
    argv = e.relaunch_argv(LINE, python="/venv/bin/python", speculative=False, port=9001)
    assert argv[:2] == ["/venv/bin/vllm", "serve"] and argv[-2:] == ["--port", "9001"]
    assert "CUDA_VISIBLE_DEVICES=0,1" not in argv and "--speculative-config" not in argv
    kept = e.relaunch_argv(LINE, python=None, speculative=True, port=None)
    assert e.parse_launch(kept).speculative_num_steps == 3


@pytest.mark.parametrize(("title", "role", "rank"), [
    ("VLLM::Worker_TP3", "worker", "TP3"), ("VLLM::Worker_PP1_TP0", "worker", "PP1_TP0"),
    ("VLLM::EngineCore", "worker", "EngineCore"), ("VLLM::APIServer_0", "other", None),
    ("sglang::scheduler_TP0", "other", None)])
def test_titles(title, role, rank):
    e = get_engine("vllm")
    assert e.process_role(title) == role and e.worker_rank(title) == rank


def test_main_process_by_entry_point_not_by_mention():
    e = get_engine("vllm")
    assert e.is_main_process(["/venv/bin/vllm", "serve", "/m"])
    assert e.is_main_process(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"])
    assert not e.is_main_process(["grep", "vllm.entrypoints.openai.api_server"])
    assert not e.is_main_process(["python", "-m", "sglang.launch_server"])


def test_a_launch_line_names_its_engine():
    assert engine_for_launch(LINE).name == "vllm"
    assert engine_for_launch("nohup python -m sglang.launch_server --model-path /m").name == "sglang"
    assert engine_for_launch("python train.py --epochs 3") is None


def test_stats_and_spec_lines_become_decode_lines():
    lines = get_engine("vllm").decode_lines((FIX / "server.log").read_text())
    assert [ln.gen_throughput for ln in lines] == [141.7, 139.9]
    assert [ln.accept_len for ln in lines] == [2.61, 2.57]
    assert lines[0].accept_rate == pytest.approx(0.537) and lines[0].running_req == 1
    assert lines[0].time == "12-06 10:41:30"


def test_startup_graph_state():
    from specdoctor.parsers.vllm import startup_cuda_graph

    assert startup_cuda_graph((FIX / "server.log").read_text()) is True
    assert startup_cuda_graph((FIX / "server-eager.log").read_text()) is False
    assert startup_cuda_graph("no such lines") is None


def test_accept_length_from_metrics_window():
    e = get_engine("vllm")
    before, after = (FIX / "metrics-before.txt").read_text(), (FIX / "metrics-after.txt").read_text()
    assert e.accept_length_from_metrics(before, after) == pytest.approx(1 + 600 / 400)
    assert e.accept_length_from_metrics(before, before) is None


def test_completion_body_and_version():
    e = get_engine("vllm")
    meta = e.read_meta({"choices": [{"text": "x", "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 7, "completion_tokens": 128}})
    assert (meta.completion_tokens, meta.prompt_tokens, meta.finish_reason) == (128, 7, "length")
    assert e.read_server_info({"version": "0.26.0"}).version == "0.26.0"
    assert e.generate_payload("hi", 64) == {"prompt": "hi", "max_tokens": 64, "temperature": 0.0, "ignore_eos": True}


def test_envs_catalog():
    cat = get_engine("vllm").parse_gate_catalog((FIX / "envs_excerpt.py").read_text())
    host_ip = cat.get("VLLM_HOST_IP")
    assert host_ip is not None and host_ip.default == "" and cat.get("VLLM_PORT").default is None
    assert cat.get("VLLM_WORKER_MULTIPROC_METHOD") is not None and cat.get("SGLANG_OEA_K0") is None


def test_force_accept_is_a_speculative_config_key_not_a_variable():
    e = get_engine("vllm")
    assert e.simulate_accept_env is None
    argv = e.force_accept_argv(LINE, 2.5)
    assert argv is not None
    spec = [a for a in argv if a.startswith("--speculative-config=")][0]
    assert '"rejection_sample_method":"synthetic"' in spec and '"synthetic_acceptance_length":2.5' in spec
    assert e.force_accept_argv("vllm serve /m", 2.5) is None


def test_context_resolves_the_engine_once_from_the_hint_and_never_by_default():
    calls: list = []
    host = MockHost(lambda cmd, env, cwd: calls.append(cmd) or "")
    host.hints = HostHints(launch=LINE)
    ctx = ToolContext(host=host)
    assert ctx.engine.name == "vllm" and ctx.engine is ctx.engine and calls == []
    bare = MockHost(lambda cmd, env, cwd: "")
    with pytest.raises(EngineUnknown, match="pass --engine"):
        _ = ToolContext(host=bare).engine
