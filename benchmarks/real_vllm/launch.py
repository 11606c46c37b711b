"""The launch line of the vLLM stories' server, in one place: the story runner and the CPU check both use it.

A dense Llama target (config only, `--load-format dummy`, which the draft inherits: config/speculative.py:212) and a
one-layer EAGLE-3 drafter from make_models.py, the Triton attention backend (no flash-attention kernel on the hot
path), acceptance forced with vLLM's own knob (`rejection_sample_method: synthetic` + `synthetic_acceptance_length`,
config/speculative.py:216-236: random weights accept almost nothing), the torch profiler behind `/start_profile`
(`--profiler-config`, entrypoints/serve/profile/api_router.py:37-45).
"""

from __future__ import annotations

import json

ACCEPT_LENGTH = 3.0  # the good run's forced mean acceptance length (of k + 1 = 4 at most)
NUM_SPECULATIVE_TOKENS = 3


def speculative_config(models: str, k: int = NUM_SPECULATIVE_TOKENS, accept_length: float = ACCEPT_LENGTH) -> str:
    return json.dumps({"method": "eagle3", "model": f"{models}/draft", "num_speculative_tokens": k,
                       "rejection_sample_method": "synthetic", "synthetic_acceptance_length": accept_length},
                      separators=(",", ":"))


def launch_argv(models: str, port: int, prof_dir: str, extra: list[str] | tuple[str, ...] = (), tp: int = 1,
                vllm: str = "vllm", k: int = NUM_SPECULATIVE_TOKENS) -> list[str]:
    """`vllm serve TARGET …` as the stories' user types it (vllm: the console script's path or name)."""
    argv = [vllm, "serve", f"{models}/target", "--host", "127.0.0.1", "--port", str(port),
            "--load-format", "dummy", "--dtype", "bfloat16", "--attention-backend", "TRITON_ATTN",
            "--gpu-memory-utilization", "0.35", "--max-model-len", "4096", "--max-num-seqs", "8",
            "--speculative-config", speculative_config(models, k=k),
            "--profiler-config", json.dumps({"profiler": "torch", "torch_profiler_dir": prof_dir},
                                            separators=(",", ":"))]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    return [*argv, *extra]
