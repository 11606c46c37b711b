"""Write the two config-only model folders the real-GPU stories serve (weights: --load-format dummy).

Target: LlamaForCausalLM, 16 layers, 2048 wide, vocab 32000 (1.68 GB of bf16 weights, random). Draft: a one-layer
LlamaForCausalLMEagle3 with draft_vocab_size == vocab_size (no d2t map needed). Both get a word-level tokenizer
built here with the `tokenizers` library (no download): the stories serve text prompts through SGLang's own
TokenizerManager, as a user's server does, instead of --skip-tokenizer-init. Its vocabulary is the most frequent
words of the installed sglang sources, padded to 32000 entries, so every id the random model emits decodes.

Usage: python make_models.py OUTDIR [SOURCES_DIR]
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

VOCAB = 32000
SPECIAL = ["<unk>", "<s>", "</s>"]
COMMON = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 16,
          "num_key_value_heads": 8, "head_dim": 128, "vocab_size": VOCAB, "max_position_embeddings": 4096,
          "rms_norm_eps": 1e-05, "hidden_act": "silu", "rope_theta": 10000.0, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2, "attention_bias": False,
          "mlp_bias": False, "initializer_range": 0.02}
TARGET = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 16, **COMMON}
DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, "draft_vocab_size": VOCAB,
         "target_hidden_size": 2048, **COMMON}


def vocabulary(sources: Path | None) -> dict[str, int]:
    """SPECIAL, then the sources' most frequent words, then filler words up to VOCAB entries."""
    counts: collections.Counter[str] = collections.Counter()
    if sources is not None:
        for f in sorted(sources.rglob("*.py")):
            counts.update(re.findall(r"\w+|[^\w\s]", f.read_text("utf-8", "replace")))
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if w not in SPECIAL]
    words = words[: VOCAB - len(SPECIAL)]
    words += [f"tok{i}" for i in range(VOCAB - len(SPECIAL) - len(words))]
    return {w: i for i, w in enumerate(SPECIAL + words)}


def write_tokenizer(folder: Path, vocab: dict[str, int]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": 4096, "add_bos_token": False}, indent=1))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, indent=1))


def main() -> None:
    out = Path(sys.argv[1])
    sources = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    vocab = vocabulary(sources)
    for name, config in (("target", TARGET), ("draft", DRAFT)):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=1))
        write_tokenizer(folder, vocab)
    print(f"models in {out}: target, draft; tokenizer of {len(vocab)} words")


if __name__ == "__main__":
    main()
