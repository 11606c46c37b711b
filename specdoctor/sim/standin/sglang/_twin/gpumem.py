"""GPU memory on the twin: what a stand-in server holds on its cards, and how a launch fails where they are full.

SGLang measures the free memory of its GPUs before loading (`pre_model_load_memory`, the minimum over TP ranks),
refuses unequal ranks, loads the weights (a CUDA OOM if they do not fit), then sizes the KV pool as
`rest = post_load_avail - pre_load_avail * (1 - mem_fraction_static)`; a pool of <= 0 tokens is SGLang's
"Not enough memory. Please try to increase --mem-fraction-static." — after 'Load weight end'. A server that
starts holds `mem_fraction_static` of what was free, weights included, plus its CUDA graphs. Messages are
SGLang's (model_runner.py / pool_configurator.py) and PyTorch's caching allocator's. Standard library only:
the stand-in server imports it. The weights come from the model directories the launch names, as SGLang loads
them: `model.safetensors.index.json`'s `metadata.total_size` (the sandbox writes it from the config's parameter
count × dtype, or from a scenario's explicit `gpu_memory.weights_gb`); a directory without one keeps the default.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

__all__ = ["MemoryConfig", "LaunchMemory", "launch_memory", "UNBALANCED", "NOT_ENOUGH", "cuda_oom", "held_on_gpus",
           "check_launch", "DEFAULT_SERVER_SHARE", "LaunchSeconds", "launch_seconds", "memory_config",
           "model_weights_gb"]

DEFAULT_SERVER_SHARE = 0.92  # what nvidia-smi shows for a server that recorded no holding (started unenforced)

UNBALANCED = "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
NOT_ENOUGH = "Not enough memory. Please try to increase --mem-fraction-static."
_CONTEXT_MIB = 512  # CUDA context + NCCL buffers a process takes on each GPU before loading anything


def cuda_oom(alloc_mib: float, gpu: int, total_mib: float, free_mib: float) -> str:
    """PyTorch's allocator message (torch.OutOfMemoryError)."""
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {alloc_mib / 1024:.2f} GiB. "
            f"GPU {gpu} has a total capacity of {total_mib / 1024:.2f} GiB of which {max(free_mib, 0):.2f} MiB is free.")


@dataclass(frozen=True)
class MemoryConfig:
    """A scenario's `gpu_memory` block: enforced by default (specdoctor stops the user's server, with consent).

    weights_gb: target weights over all ranks (sharded by TP); draft_gb: EAGLE draft per rank (not sharded);
    cuda_graph_gb: held outside the static pool per rank.
    """

    enforce: bool = True
    weights_gb: float = 16.0
    draft_gb: float = 1.0
    cuda_graph_gb: float = 1.2


def model_weights_gb(model_dir: str | None) -> float | None:
    """GiB of weights in a model directory (its safetensors index), None when it has none."""
    if not model_dir:
        return None
    try:
        with open(os.path.join(model_dir, "model.safetensors.index.json"), encoding="utf-8") as fh:
            return float(json.load(fh)["metadata"]["total_size"]) / (1 << 30)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def memory_config(twin: dict, args: dict | None = None) -> MemoryConfig:
    """The scenario's `gpu_memory` block with the weights of the models this launch names (`--model-path`,
    `--speculative-draft-model-path`) where their directories say how large they are."""
    raw = {k: v for k, v in (twin.get("gpu_memory") or {}).items()
           if k in MemoryConfig.__dataclass_fields__ and v is not None}
    args = args or {}
    weights = model_weights_gb(args.get("model_path"))
    draft = model_weights_gb(args.get("speculative_draft_model_path"))
    if weights is not None:
        raw["weights_gb"] = weights
    if draft is not None:
        raw["draft_gb"] = draft
    return MemoryConfig(**raw)


@dataclass
class LaunchMemory:
    """The outcome of one launch on the cards as they are (`stage`: where it failed: init, load or kv)."""

    ok: bool
    avail_gb: float  # pre_model_load_memory: the least free memory over its GPUs
    stage: str | None = None
    error: str = ""
    held_mib: dict[int, int] = field(default_factory=dict)  # GPU -> MiB this server holds once ready
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


def alive(pid: int) -> bool:
    """A live (not zombie) process: what a pidfile is worth in the twin's nvidia-smi and memory model."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def held_on_gpus(root: str, twin: dict, total_mib: float, exclude_pid: int | None = None) -> dict[int, float]:
    """MiB held on each GPU by the live servers of the sandbox (their pidfiles' schedulers) and other GPU jobs."""
    used: dict[int, float] = {}
    for f in glob.glob(os.path.join(root, "run", "pids", "*.json")):
        try:
            with open(f, encoding="utf-8") as fh:
                procs = json.load(fh)["procs"]
        except (OSError, ValueError, KeyError):
            continue
        if exclude_pid is not None and any(p.get("pid") == exclude_pid for p in procs):
            continue
        for p in procs:
            if "gpu" not in p or \
                    not alive(int(p["pid"])):
                continue
            mib = p.get("mem_mib")
            used[int(p["gpu"])] = used.get(int(p["gpu"]), 0.0) + \
                (float(mib) if mib is not None else DEFAULT_SERVER_SHARE * total_mib)
    for job in twin.get("gpu_processes") or []:
        try:
            with open(os.path.join(root, "run", "gpu-procs", f"{job['id']}.pid"), encoding="utf-8") as fh:
                pid = int(fh.read().strip())
        except (OSError, ValueError, KeyError):
            continue
        if alive(pid):
            for g in job.get("gpus") or []:
                used[int(g)] = used.get(int(g), 0.0) + float(job.get("used_memory_mib", 20000))
    return used


def check_launch(root: str, twin: dict, gpus: list[int], mem_fraction_static: float, *, speculative: bool,
                 own_pid: int, args: dict | None = None) -> LaunchMemory | None:
    """The launch's memory outcome when the scenario enforces GPU memory (`gpu_memory: {enforce: true}`), else None."""
    config = memory_config(twin, args)
    if not config.enforce:
        return None
    total = float(twin["hardware"].get("memory_gb", 96.0)) * 1024
    return launch_memory(total, held_on_gpus(root, twin, total, own_pid), gpus, mem_fraction_static, config,
                         speculative=speculative)


@dataclass(frozen=True)
class LaunchSeconds:
    """What one start-up costs in model seconds: weights read from disk, the draft, CUDA-graph capture."""

    load_s: float
    draft_load_s: float
    graph_s: float
    draft_graph_s: float

    @property
    def total_s(self) -> float:
        return self.load_s + self.draft_load_s + self.graph_s + self.draft_graph_s


def launch_seconds(twin: dict, *, speculative: bool, cuda_graph: bool, args: dict | None = None) -> LaunchSeconds:
    """The scenario's `server.launch_time` (disk speed, capture times) and the launch's weights, for one launch."""
    lt = twin.get("launch_time") or {}
    mem = memory_config(twin, args)
    disk = float(lt.get("disk_gb_s", 2.0))
    return LaunchSeconds(load_s=mem.weights_gb / disk,
                         draft_load_s=mem.draft_gb / disk if speculative else 0.0,
                         graph_s=float(lt.get("cuda_graph_s", 35.0)) if cuda_graph else 0.0,
                         draft_graph_s=float(lt.get("draft_cuda_graph_s", 12.0)) if cuda_graph and speculative
                         else 0.0)
