"""All-reduce latency with torch.distributed, printed like nccl-tests' all_reduce_perf (stdlib + torch only).

Shipped to the GPU host and run with its python under torchrun, one process per rank:
    torchrun --nproc-per-node 8 allreduce_bench.py --sizes 14336,229376 --graph 10 [--json]
With --backend nccl (default) each rank uses its GPU and, with --graph N > 0, captures N all-reduces in one
CUDA graph and times replays with CUDA events (how SGLang's decode runs them). With --backend gloo it runs
on CPU (for tests of the harness and the output format, not for numbers). Only rank 0 prints.
Times are in-place (torch's all_reduce is in place, as SGLang's TP all-reduce is); the out-of-place
columns read N/A. The time reported is the average over ranks, as nccl-tests does by default.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

__all__ = ["main", "parse_sizes"]

_DTYPES = {"bfloat16": 2, "float16": 2, "half": 2, "float": 4, "float32": 4, "double": 8, "int32": 4, "int8": 1}


def _human(tok: str) -> int:
    tok = tok.strip().upper()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(tok[-1:], 1)
    return int(float(tok[:-1] if mult > 1 else tok) * mult)


def parse_sizes(sizes: str | None, minbytes: str, maxbytes: str, factor: int) -> list[int]:
    """An explicit comma list, or the nccl-tests geometric sweep -b .. -e by -f."""
    if sizes:
        return sorted({_human(s) for s in sizes.split(",") if s.strip()})
    lo, hi, out = _human(minbytes), _human(maxbytes), []
    s = lo
    while s <= hi:
        out.append(s)
        s = s * max(factor, 2)
    return out


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", help="comma-separated message sizes in bytes (K/M/G suffixes allowed)")
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="32M")
    p.add_argument("-f", "--stepfactor", type=int, default=2)
    p.add_argument("-d", "--datatype", default="bfloat16", choices=sorted(_DTYPES))
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-G", "--graph", type=int, default=10, help="all-reduces captured per CUDA graph (0 = eager)")
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    p.add_argument("--json", action="store_true", help="print nccl-tests -J style JSON instead of the table")
    return p.parse_args(argv)


def _fmt(v: float | None, width: int) -> str:
    if v is None:
        return f"{'N/A':>{width}}"
    if v < 10 ** (width - 3):
        return f"{v:>{width}.2f}"
    if v < 10 ** (width - 2):
        return f"{v:>{width}.1f}"
    return f"{v:>{width}.0f}"


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    import torch
    import torch.distributed as dist

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "half": torch.float16, "float": torch.float32,
             "float32": torch.float32, "double": torch.float64, "int32": torch.int32, "int8": torch.int8}[a.datatype]
    elem = _DTYPES[a.datatype]
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    gpu = a.backend == "nccl"
    if gpu:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    sizes = parse_sizes(a.sizes, a.minbytes, a.maxbytes, a.stepfactor)
    use_graph = gpu and a.graph > 0 and world > 1  # one rank: in-place all-reduce is a no-op, the graph empty

    rows, wrong_total = [], 0
    for size in sizes:
        count = max(1, size // elem)
        check = torch.full((count,), float(rank + 1), dtype=dtype, device=device)
        dist.all_reduce(check)
        expect = world * (world + 1) / 2
        wrong = int((check.float() != expect).sum().item())
        wrong_total += wrong
        buf = torch.zeros(count, dtype=dtype, device=device)
        for _ in range(a.warmup_iters):
            dist.all_reduce(buf)
        if gpu:
            torch.cuda.synchronize()
        if use_graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    dist.all_reduce(buf)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(a.graph):
                    dist.all_reduce(buf)
            graph.replay()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            dist.barrier()
            start.record()
            for _ in range(a.iters):
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            usec = start.elapsed_time(end) * 1000.0 / (a.iters * a.graph)
        elif gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            dist.barrier()
            start.record()
            for _ in range(a.iters):
                dist.all_reduce(buf)
            end.record()
            torch.cuda.synchronize()
            usec = start.elapsed_time(end) * 1000.0 / a.iters
        else:
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                dist.all_reduce(buf)
            usec = (time.perf_counter() - t0) * 1e6 / a.iters
        t = torch.tensor([usec], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        avg = float(t.item()) / world
        nbytes = count * elem
        algbw = nbytes / (avg * 1e-6) / 1e9 if avg > 0 else 0.0
        busbw = algbw * 2 * (world - 1) / world
        rows.append({"size": nbytes, "count": count, "time": avg, "algbw": algbw, "busbw": busbw, "wrong": wrong})

    if rank == 0:
        nccl = ".".join(str(x) for x in torch.cuda.nccl.version()) if gpu else None
        avg_bus = sum(r["busbw"] for r in rows) / len(rows) if rows else 0.0
        if a.json:
            print(json.dumps(_json_doc(a, rows, world, nccl, avg_bus, wrong_total, torch.__version__)))
        else:
            _print_table(a, rows, world, nccl, avg_bus, wrong_total, torch.__version__, sizes, gpu)
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _json_doc(a, rows, world, nccl, avg_bus, wrong_total, torch_version) -> dict:
    return {
        "version": 2, "tool": "allreduce_bench", "collective": "all_reduce", "torch": torch_version,
        "backend": a.backend, "args": ["allreduce_bench.py", *sys.argv[1:]], "nccl_version": nccl,
        "config": {"nthreads": 1, "ngpus": world, "warmup_iters": a.warmup_iters, "iterations": a.iters,
                   "graph": a.graph if a.backend == "nccl" and world > 1 else 0},
        "results": [{"size": r["size"], "count": r["count"], "type": a.datatype, "redop": "sum", "root": "-1",
                     "out_of_place": None,
                     "in_place": {"time": r["time"], "alg_bw": r["algbw"], "bus_bw": r["busbw"], "nwrong": r["wrong"]}}
                    for r in rows],
        "out_of_bounds": {"count": wrong_total, "okay": wrong_total == 0},
        "average_bus_bandwidth": {"bandwidth": avg_bus, "okay": "unchecked"},
    }


def _print_table(a, rows, world, nccl, avg_bus, wrong_total, torch_version, sizes, gpu) -> None:
    graph = a.graph if gpu and world > 1 else 0
    print(f"# allreduce_bench.py: all_reduce via torch.distributed (backend {a.backend}, torch {torch_version}, "
          f"NCCL {nccl or 'n/a'})")
    if nccl:
        print(f"# NCCL version {nccl}")
    print(f"# nThread 1 nGpus {world} minBytes {min(sizes)} maxBytes {max(sizes)} step: 0(list) warmup iters: "
          f"{a.warmup_iters} iters: {a.iters} agg iters: 1 validation: 1 graph: {graph}")
    print("#")
    print("# Using devices")
    print(f"#  Rank  0 Group  0 Pid {os.getpid():6d} on {socket.gethostname():>10} device "
          f"{'cuda' if gpu else 'cpu'}")
    print("#")
    print(f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place")
    print(f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
          f"{'busbw':>6}  {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}")
    print(f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
          f"{'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}")
    for r in rows:
        print(f"  {r['size']:>10}  {r['count']:>12}  {a.datatype:>8}  {'sum':>6}  {-1:>6}  {_fmt(None, 7)}  "
              f"{_fmt(None, 6)}  {_fmt(None, 6)}  {'N/A':>6}  {_fmt(r['time'], 7)}  {_fmt(r['algbw'], 6)}  "
              f"{_fmt(r['busbw'], 6)}  {r['wrong']:>6}")
    print(f"# {'Out of bounds values':<20} : {wrong_total} {'FAILED' if wrong_total else 'OK'}")
    print(f"# {'Avg bus bandwidth':<20} : {avg_bus:g}")
    print("#")


if __name__ == "__main__":
    sys.exit(main())
