"""The SGLang implementations of the inference-engine seam: processes, launch lines, endpoints, env, versions."""

from __future__ import annotations

import pytest

from specdoctor.inference import SGLANG_0_5_9, SGLANG_0_5_23, InferenceEngine, SGLang, get_engine


@pytest.mark.parametrize("engine", [SGLang(), SGLANG_0_5_9, SGLANG_0_5_23])
def test_each_version_implements_the_protocol(engine):
    assert isinstance(engine, InferenceEngine)
    assert engine.name == "sglang" and engine.package == "sglang"


def test_main_processes_are_recognised_by_entry_point_not_by_mention():
    e = get_engine("sglang")
    assert e.is_main_process(["python3", "-m", "sglang.launch_server", "--model", "/m"])
    assert e.is_main_process(["/venv/bin/sglang", "serve", "--model-path", "/m"])
    assert not e.is_main_process(["vim", "notes-about-sglang.launch_server.txt"])
    assert not e.is_main_process(["grep", "sglang serve"])
    assert not e.is_main_process(["python3", "-m", "vllm.entrypoints.openai.api_server"])


@pytest.mark.parametrize(("title", "role", "rank"), [
    ("sglang::scheduler_TP3", "worker", "TP3"),
    ("sglang::scheduler_DP1_TP0", "worker", "DP1_TP0"),
    ("sglang::scheduler", "worker", None),
    ("sglang::detokenizer", "detokenizer", None),
    ("sglang::data_parallel_controller", "other", None),
    ("python3", "other", None),
])
def test_worker_titles_give_role_and_rank(title, role, rank):
    e = get_engine("sglang")
    assert e.process_role(title) == role
    assert (e.worker_rank(title) if role == "worker" else None) == rank


def test_relaunch_drops_speculation_swaps_python_and_forces_the_port():
    e = get_engine("sglang")
    line = ("NCCL_PROTO=LL python3 -m sglang.launch_server --model /m --tp 8 --port 30000 "
            "--speculative-algo EAGLE3 --speculative-draft /d --speculative-num-steps=3 --disable-cuda-graph")
    argv = e.relaunch_argv(line, python="/venv/bin/python", speculative=False, port=31234)
    assert argv[:3] == ["/venv/bin/python", "-m", "sglang.launch_server"]
    assert not any(t.startswith("--speculative") for t in argv) and "/d" not in argv
    assert argv[-2:] == ["--port", "31234"] and argv.count("--port") == 1 and "--disable-cuda-graph" in argv
    assert "NCCL_PROTO=LL" not in argv  # leading env goes to the environment, not the argv
    kept = e.relaunch_argv(line, python=None, speculative=True, port=None)
    assert "--speculative-algo" in kept and kept[0] == "python3" and "30000" in kept


def test_endpoint_names_follow_the_version():
    assert SGLANG_0_5_9.server_info_paths[0] == "/get_server_info"
    assert SGLANG_0_5_23.server_info_paths[0] == "/server_info"
    assert SGLANG_0_5_9.model_info_paths[0] == "/get_model_info"
    assert SGLANG_0_5_23.model_info_paths[0] == "/model_info"
    assert set(SGLang().server_info_paths) == {"/server_info", "/get_server_info"}  # unknown: try both


def test_forced_env_follows_the_version():
    assert SGLANG_0_5_23.forced_env()["CUDA_DEVICE_MAX_CONNECTIONS"] == "8 (always)"
    assert "CUDA_MODULE_LOADING" in SGLANG_0_5_9.forced_env()
    assert "CUDA_MODULE_LOADING" not in SGLANG_0_5_23.forced_env()
    assert SGLang("0.4.6").forced_env()["CUDA_DEVICE_MAX_CONNECTIONS"] == "4 (always)"
    assert SGLang().forced_env() == {}  # nothing claimed about an unknown version
    assert {"NCCL_CUMEM_ENABLE", "NCCL_NVLS_ENABLE", "CUDA_DEVICE_MAX_CONNECTIONS"} <= SGLang().forced_env_names


def test_meta_info_names_of_both_versions_read_the_same():
    old = {"meta_info": {"completion_tokens": 64, "spec_verify_ct": 20, "spec_accept_token_num": 44,
                         "total_retractions": 0, "e2e_latency": 0.5}}
    new = {"meta_info": {"completion_tokens": 64, "spec_verify_ct": 20, "spec_num_correct_drafts": 44,
                         "num_retractions": 0, "e2e_latency": 0.5}}
    a, b = SGLANG_0_5_9.read_meta(old), SGLANG_0_5_23.read_meta(new)
    assert a == b and a.spec_num_correct_drafts == 44 and a.retractions == 0


def test_a_trial_tree_is_imported_from_its_python_folder():
    assert get_engine("sglang").tree_import_path("/home/u/.specdoctor/trees/r1/") == "/home/u/.specdoctor/trees/r1/python"


def test_an_unknown_engine_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown inference engine 'tgi'"):
        get_engine("tgi")
