"""GPU memory on the twin: what a stand-in server holds on its cards, and how a launch fails where they are full.

SGLang measures the free memory of its GPUs before loading (`pre_model_load_memory`, the minimum over TP ranks),
refuses unequal ranks, loads the weights (a CUDA OOM if they do not fit), then sizes the KV pool as
`rest = post_load_avail - pre_load_avail * (1 - mem_fraction_static)`; a pool of <= 0 tokens is SGLang's
"Not enough memory. Please try to increase --mem-fraction-static." — after 'Load weight end'. A server that
starts holds `mem_fraction_static` of what was free, weights included, plus its CUDA graphs. Messages are
SGLang's (model_runner.py / pool_configurator.py) and PyTorch's caching allocator's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["MemoryConfig", "LaunchMemory", "launch_memory", "UNBALANCED", "NOT_ENOUGH", "cuda_oom"]

UNBALANCED = "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
NOT_ENOUGH = "Not enough memory. Please try to increase --mem-fraction-static."
_CONTEXT_MIB = 512  # CUDA context + NCCL buffers a process takes on each GPU before loading anything


def cuda_oom(alloc_mib: float, gpu: int, total_mib: float, free_mib: float) -> str:
    """PyTorch's allocator message (torch.OutOfMemoryError)."""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc_mib / 1024:.2f} GiB. "
            f"GPU {gpu} has a total capacity of {total_mib / 1024:.2f} GiB of which {max(free_mib, 0):.2f} MiB is free.")


class MemoryConfig(BaseModel):
    """A scenario's `gpu_memory` block: off by default (today's agent relaunches beside the user's server)."""

    enforce: bool = False
    weights_gb: float = Field(default=16.0, gt=0, description="Target weights over all ranks (sharded by TP).")
    draft_gb: float = Field(default=1.0, ge=0, description="EAGLE draft weights per rank (not sharded).")
    cuda_graph_gb: float = Field(default=1.2, ge=0, description="Held outside the static pool per rank.")


class LaunchMemory(BaseModel):
    """The outcome of one launch on the cards as they are."""

    ok: bool
    stage: Literal["init", "load", "kv"] | None = Field(default=None, description="Where it failed, if it did.")
    error: str = ""
    held_mib: dict[int, int] = Field(default_factory=dict, description="GPU -> MiB this server holds once ready.")
    avail_gb: float = Field(description="pre_model_load_memory: the least free memory over its GPUs, GB.")
    after_load_gb: float = 0.0
    kv_gb: float = 0.0


def launch_memory(total_mib: float, used_mib: dict[int, float], gpus: list[int], mem_fraction_static: float,
                  config: MemoryConfig, *, speculative: bool) -> LaunchMemory:
    """What SGLang does on `gpus` (one per TP rank) when `used_mib` is already held by other processes."""
    free = {g: total_mib - used_mib.get(g, 0.0) - _CONTEXT_MIB for g in gpus}
    pre = min(free.values())
    local = free[gpus[0]]
    avail_gb = pre / 1024
    if len(gpus) > 1 and pre < local * 0.9:
        msg = UNBALANCED + (f"pre_model_load_memory={pre / 1024!r}, local_gpu_memory={local / 1024!r}, "
                            f"local_gpu_memory * 0.9={local / 1024 * 0.9!r}")
        return LaunchMemory(ok=False, stage="init", error=f"RuntimeError: {msg}", avail_gb=avail_gb)
    weights_mib = config.weights_gb * 1024 / len(gpus) + (config.draft_gb * 1024 if speculative else 0.0)
    if weights_mib > pre:
        worst = min(free, key=lambda g: free[g])
        return LaunchMemory(ok=False, stage="load", avail_gb=avail_gb,
                            error=cuda_oom(weights_mib - max(pre, 0.0) + 256, worst, total_mib, pre))
    after = pre - weights_mib
    rest = after - pre * (1 - mem_fraction_static)
    if rest <= 0:
        return LaunchMemory(ok=False, stage="kv", error=f"RuntimeError: {NOT_ENOUGH}", avail_gb=avail_gb,
                            after_load_gb=after / 1024)
    held = int(pre * mem_fraction_static + config.cuda_graph_gb * 1024 + _CONTEXT_MIB)
    return LaunchMemory(ok=True, held_mib={g: held for g in gpus}, avail_gb=avail_gb, after_load_gb=after / 1024,
                        kv_gb=rest / 1024)
