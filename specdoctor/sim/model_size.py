"""A model's weight size from its Hugging Face config, for the twin's model directories.

A real model directory carries `model.safetensors.index.json`, whose `metadata.total_size` is the bytes SGLang
loads; the twin's directories hold a config only, so the sandbox writes that index from the config's parameter count
× bytes per parameter, and the stand-in's GPU memory reads it (weights are what decides whether a second server fits
beside the user's). The count follows the usual transformer layout: embeddings and LM head, attention (grouped KV,
or DeepSeek's MLA when `kv_lora_rank` is set), and a dense or mixture-of-experts MLP; fields a config leaves out
take the common defaults of its family, so a sparse config still gives the right order of magnitude.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["GIB", "bytes_per_param", "param_count", "weights_bytes", "write_safetensors_index"]

GIB = 1 << 30
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "float8_e4m3fn": 1, "int8": 1}


def _text(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal wrapper's language model (`text_config`), else the config itself."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def _attention(c: dict[str, Any], h: int, in_dim: int) -> int:
    heads = int(c.get("num_attention_heads") or max(h // 128, 1))
    if c.get("kv_lora_rank"):  # MLA (DeepSeek V2/V3, Kimi K2)
        q_lora = int(c.get("q_lora_rank") or 1536)
        kv_lora = int(c["kv_lora_rank"])
        rope, nope = int(c.get("qk_rope_head_dim", 64)), int(c.get("qk_nope_head_dim", 128))
        v = int(c.get("v_head_dim", 128))
        return (in_dim * q_lora + q_lora * heads * (nope + rope) + in_dim * (kv_lora + rope)
                + kv_lora * heads * (nope + v) + heads * v * h)
    head_dim = int(c.get("head_dim") or h // heads)
    kv = int(c.get("num_key_value_heads") or heads)
    return in_dim * heads * head_dim + 2 * in_dim * kv * head_dim + heads * head_dim * h


def _experts(c: dict[str, Any]) -> int:
    return int(c.get("n_routed_experts") or c.get("num_experts") or c.get("num_local_experts") or 0)


def param_count(config: dict[str, Any]) -> int:
    """Parameters of a causal LM (or an EAGLE-3 draft: one layer over 2× hidden input, its `fc` and own LM head)."""
    c = _text(config)
    h, layers = int(c["hidden_size"]), int(c.get("num_hidden_layers", 1))
    vocab = int(c.get("vocab_size", 32000))
    dense_i = int(c.get("intermediate_size") or round(3.5 * h))
    eagle3 = any("Eagle3" in a for a in c.get("architectures") or [])
    if eagle3:  # embeddings come from the target; the layer reads [embeds, hidden] (2h); fc folds 3 target layers
        draft_vocab = int(c.get("draft_vocab_size") or vocab)
        return _attention(c, h, 2 * h) + 3 * h * dense_i + 3 * h * h + h * draft_vocab
    experts = _experts(c)
    moe_i = int(c.get("moe_intermediate_size") or dense_i)
    shared = int(c.get("n_shared_experts") or 0)
    dense_layers = int(c.get("first_k_dense_replace") or 0) if experts else layers
    per_attn = _attention(c, h, h)
    total = layers * per_attn + dense_layers * 3 * h * dense_i
    total += (layers - dense_layers) * ((experts + shared) * 3 * h * moe_i + h * experts)
    total += vocab * h * (1 if c.get("tie_word_embeddings") else 2)
    return total


def bytes_per_param(config: dict[str, Any]) -> float:
    """From the quantization config (fp8: 1 byte; 4-bit int: half a byte) else `torch_dtype`, bf16 by default."""
    c = _text(config)
    q = c.get("quantization_config") or config.get("quantization_config") or {}
    if q:
        bits = q.get("bits") or q.get("num_bits")
        for group in (q.get("config_groups") or {}).values():  # compressed-tensors
            bits = bits or (group.get("weights") or {}).get("num_bits")
        if bits:
            return int(bits) / 8
        if "fp8" in str(q.get("quant_method", "")).lower():
            return 1.0
    return float(_DTYPE_BYTES.get(str(c.get("torch_dtype") or c.get("dtype") or "bfloat16"), 2))


def weights_bytes(config: dict[str, Any]) -> int:
    return int(param_count(config) * bytes_per_param(config))


def write_safetensors_index(model_dir: Path, total_size: int) -> None:
    """`model.safetensors.index.json` as Hugging Face writes it (the weight map names one shard for the whole)."""
    index = {"metadata": {"total_size": int(total_size)}, "weight_map": {"lm_head.weight": "model.safetensors"}}
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
