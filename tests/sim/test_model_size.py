"""Weights from a model config (what the twin's model directories say they hold): public models' parameter counts
from their real config.json fields, bytes per parameter from the quantization config, and the index the sandbox
writes that the stand-in loads."""

from __future__ import annotations

import json

import pytest

from specdoctor.sim import build_sandbox, load_scenario
from specdoctor.sim.model_size import GIB, bytes_per_param, param_count, weights_bytes
from specdoctor.sim.standin.sglang._twin.gpumem import memory_config, model_weights_gb

LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=8, vocab_size=128256)
LLAMA_70B = dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64,
                 num_key_value_heads=8, vocab_size=128256)
QWEN3_235B = dict(hidden_size=4096, num_hidden_layers=94, num_experts=128, moe_intermediate_size=1536,
                  num_attention_heads=64, num_key_value_heads=4, head_dim=128, vocab_size=151936)
DEEPSEEK_V3 = dict(hidden_size=7168, num_hidden_layers=61, n_routed_experts=256, moe_intermediate_size=2048,
                   n_shared_experts=1, first_k_dense_replace=3, intermediate_size=18432, num_attention_heads=128,
                   q_lora_rank=1536, kv_lora_rank=512, vocab_size=129280)
MIXTRAL_8X7B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, num_local_experts=8, vocab_size=32000)


@pytest.mark.parametrize(("config", "published"), [(LLAMA_8B, 8.03e9), (LLAMA_70B, 70.6e9), (QWEN3_235B, 235e9),
                                                   (DEEPSEEK_V3, 671e9), (MIXTRAL_8X7B, 46.7e9)])
def test_parameter_counts_match_the_published_sizes(config, published):
    assert param_count(config) == pytest.approx(published, rel=0.02)


def test_a_multimodal_wrapper_counts_its_language_model():
    assert param_count({"architectures": ["KimiK25ForConditionalGeneration"], "hidden_size": 1,
                        "text_config": DEEPSEEK_V3}) == param_count(DEEPSEEK_V3)


def test_bytes_per_parameter_follow_the_quantization():
    assert bytes_per_param({**LLAMA_8B, "torch_dtype": "bfloat16"}) == 2
    assert bytes_per_param({**LLAMA_8B, "torch_dtype": "float32"}) == 4
    assert bytes_per_param({**LLAMA_8B, "quantization_config": {"quant_method": "fp8"}}) == 1
    int4 = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 4}}}}
    assert bytes_per_param({**LLAMA_8B, "quantization_config": int4}) == 0.5
    assert bytes_per_param({**LLAMA_8B, "quantization_config": {"quant_method": "awq", "bits": 4}}) == 0.5


def test_the_sandbox_writes_each_models_size_and_the_stand_in_loads_it(tmp_path):
    sc = load_scenario("seed")
    sb = build_sandbox(sc, root=tmp_path / "box", start_server=False)
    try:
        target, draft = sb.root / "models" / "Kimi-K2.5", sb.root / "models" / "Kimi-K2.5-EAGLE3"
        index = json.loads((target / "model.safetensors.index.json").read_text())
        assert index["metadata"]["total_size"] == weights_bytes(sc.server.model_config_json)
        assert 400 < model_weights_gb(str(target)) < 600  # 1T parameters at 4 bits
        mem = memory_config({"gpu_memory": {"enforce": True}},
                            {"model_path": str(target), "speculative_draft_model_path": str(draft)})
        assert mem.weights_gb == pytest.approx(index["metadata"]["total_size"] / GIB)
        assert 0.5 < mem.draft_gb < 5
    finally:
        sb.remove()


def test_a_scenarios_own_figure_wins_over_the_config(tmp_path):
    sc = load_scenario("seed")
    sc = sc.model_copy(update={"gpu_memory": sc.gpu_memory.model_copy(update={"weights_gb": 16.0})})
    sb = build_sandbox(sc, root=tmp_path / "box", start_server=False)
    try:
        assert model_weights_gb(str(sb.root / "models" / "Kimi-K2.5")) == pytest.approx(16.0)
    finally:
        sb.remove()


def test_a_directory_without_an_index_keeps_the_default(tmp_path):
    assert model_weights_gb(str(tmp_path)) is None
    assert memory_config({"gpu_memory": {}}, {"model_path": str(tmp_path)}).weights_gb == 16.0
