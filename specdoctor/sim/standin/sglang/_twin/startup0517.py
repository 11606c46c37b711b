"""The start-up lines of a real 0.5.17 server (tests/fixtures/sglang-0.5.17-h200/*/server.log), in its order.

0.5.17 captures a breakable prefill graph for the target (and the draft), then one full graph per decode phase,
and sums it all up in `Engine startup timings`. The numbers are the twin's (launch_time, gpu_memory).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["log_startup_0517"]

_PREFILL_TOKENS = [4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
                   288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 832, 896, 960, 1024, 1280, 1536, 1792,
                   2048, 2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096, 4608, 5120, 5632, 6144, 6656, 7168, 7680,
                   8192]


def _decode_bs(max_bs: int, speculative: bool) -> list[int]:
    steps = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16] if speculative else [1, 2, 4, 8, 12, 16]
    return [b for b in steps if b <= max_bs] + list(range(24, max_bs + 1, 8))


def log_startup_0517(log: Callable[[str], None], *, args: dict, lt, mem_gb: float, weights_gb: float,
                     draft_gb: float, arch: str, darch: str | None, max_total: int) -> float:
    """Log from the first 'Load weight begin' to 'Engine startup timings'; returns the model seconds it took."""
    avail = mem_gb - 1.3
    log(f"Load weight begin. avail mem={avail:.2f} GB")
    log(f"Load weight end. elapsed={lt.load_s:.2f} s, type={arch}, avail mem={avail - weights_gb:.2f} GB, "
        f"mem usage={weights_gb:.2f} GB.")
    avail -= weights_gb
    if darch:
        log(f"Load weight begin. avail mem={avail:.2f} GB")
        log(f"Load weight end. elapsed={lt.draft_load_s:.2f} s, type={darch}, avail mem={avail - draft_gb:.2f} GB, "
            f"mem usage={draft_gb:.2f} GB.")
        avail -= draft_gb
    kv = max(avail - mem_gb * (1 - float(args.get("mem_fraction_static") or 0.88)), 0.1)
    for share in ((0.94, 0.06) if darch else (1.0,)):
        side = kv * share / 2
        log(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {max_total}, K size: {side:.2f} GB, "
            f"V size: {side:.2f} GB")
        avail -= 2 * side
        log(f"Memory pool end. avail mem={avail:.2f} GB")
    graphs = {k: 0.0 for k in ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")}
    if not args.get("disable_cuda_graph"):
        max_bs = int(args.get("cuda_graph_max_bs_decode") or 16)
        ndraft = int(args.get("speculative_num_draft_tokens") or 1)
        phases = [("target prefill", "prefill", lt.graph_s * 0.7, None)]
        if darch:
            phases += [("target verify", "target_verify", lt.graph_s * 0.3, ndraft),
                       ("draft prefill", "draft_prefill", lt.draft_graph_s * 0.2, None),
                       ("draft decode", "draft_decode", lt.draft_graph_s * 0.6, 1),
                       ("draft extend", "draft_extend", lt.draft_graph_s * 0.2, ndraft)]
        else:
            phases.append(("target decode", "decode", lt.graph_s * 0.3, 1))
        for name, key, secs, per_req in phases:
            shape = (f"backend=breakable, num_tokens={_PREFILL_TOKENS}" if per_req is None else
                     f"backend=full, num_tokens_per_req={per_req}, bs={_decode_bs(max_bs, bool(darch))}")
            log(f"Capture {name} CUDA graph begin. {shape}, avail mem={avail:.2f} GB")
            used = 0.8 if per_req is None else 0.06
            log(f"Capture {name} CUDA graph end. elapsed={secs:.2f} s, mem usage={used:.2f} GB, "
                f"avail mem={avail - used:.2f} GB.")
            avail -= used
            graphs[key] = secs
    log(f"max_total_num_tokens={max_total}, chunked_prefill_size={args['chunked_prefill_size']}, "
        f"max_prefill_tokens={args.get('max_prefill_tokens') or 16384}, "
        f"max_running_requests={args['max_running_requests']}, context_len={args.get('context_length') or 262144}, "
        f"available_gpu_mem={avail:.2f} GB")
    log("Tree cache initialized: source=default impl=RadixCache hybrid_swa=False hybrid_ssm=False "
        "hierarchical=False streaming_wrapped=False")
    load = lt.load_s + lt.draft_load_s
    sched = load + 1.4 + sum(graphs.values()) + 2.0
    log(f"Engine startup timings (s): load_weight={load:.2f}, kv_cache_allocation=1.42, scheduler_e2e={sched:.2f}, "
        "cuda_graph={" + ", ".join(f"{k}={v:.2f}" for k, v in graphs.items()) + f"}}, tokenizer_e2e={sched + 19:.2f}")
    return sched
