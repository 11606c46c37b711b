"""Stand-in nccl-tests `all_reduce_perf`: the column format of real nccl-tests, latency from the twin's model."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import socket
import sys
import time
import zlib

from .config import bump_counter, exec_environ, load_twin, sandbox_root
from .perf import allreduce_us, effective_nccl_env, gpus_for, link_bw_factor

__all__ = ["main"]

_TYPES = {"int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
          "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8, "bfloat16": 2}
_OPTS = {"-t": "nthreads", "-g": "ngpus", "-b": "minbytes", "-e": "maxbytes", "-i": "stepbytes", "-f": "stepfactor",
         "-n": "iters", "-m": "agg_iters", "-w": "warmup", "-p": "parallel_init", "-c": "check", "-o": "op",
         "-d": "datatype", "-r": "root", "-z": "blocking", "-y": "stream_null", "-T": "timeout", "-G": "cudagraph",
         "-C": "report_cputime", "-a": "average", "-J": "json", "-R": "local_register", "-N": "run_cycles"}
_LONG = {"--" + v: k for k, v in _OPTS.items()}
_LONG.update({"--nthreads": "-t", "--ngpus": "-g", "--minbytes": "-b", "--maxbytes": "-e", "--stepfactor": "-f",
              "--iters": "-n", "--warmup_iters": "-w", "--op": "-o", "--datatype": "-d", "--cudagraph": "-G",
              "--run_cycles": "-N"})


def _size(text: str) -> int:
    text = text.strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def _usage() -> None:
    sys.stderr.write("USAGE: all_reduce_perf \n\t[-t,--nthreads <num threads>] \n\t[-g,--ngpus <gpus per thread>] \n"
                     "\t[-b,--minbytes <min size in bytes>] \n\t[-e,--maxbytes <max size in bytes>] \n"
                     "\t[-i,--stepbytes <increment size>] \n\t[-f,--stepfactor <increment factor>] \n"
                     "\t[-n,--iters <iteration count>] \n\t[-w,--warmup_iters <warmup iteration count>] \n"
                     "\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t[-d,--datatype <nccltype/all>] \n"
                     "\t[-G,--cudagraph <num graph launches>] \n\t[-J,--output_file <json file>] \n"
                     "\t[-h,--help]\n")


def _parse(argv: list[str]) -> dict | None:
    o = {"nthreads": "1", "ngpus": "1", "minbytes": "32M", "maxbytes": "32M", "stepfactor": "1", "stepbytes": None,
         "iters": "20", "warmup": "1", "check": "1", "op": "sum", "datatype": "float", "cudagraph": "0",
         "json": None, "average": "1", "agg_iters": "1", "root": "0", "run_cycles": "1"}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            _usage()
            return None
        key, val = a, None
        if a.startswith("--") and "=" in a:
            key, val = a.split("=", 1)
        key = _LONG.get(key, key)
        if key in _OPTS:
            if val is None:
                if len(key) == 2 and len(a) > 2 and not a.startswith("--"):
                    val = a[2:]
                elif i + 1 < len(argv):
                    i += 1
                    val = argv[i]
                else:
                    _usage()
                    return None
            o[_OPTS[key]] = val
        elif len(a) > 2 and a[:2] in _OPTS:
            o[_OPTS[a[:2]]] = a[2:]
        else:
            sys.stderr.write(f"all_reduce_perf: invalid option -- '{a.lstrip('-')}'\n")
            _usage()
            return None
        i += 1
    return o


def _fmt_time(us: float) -> str:
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def _keep_busy(devices: list[int], cycles: int) -> None:
    """`-N 0` (run cycles forever) keeps its GPUs busy until it is killed, as the real binary does; the twin's
    nvidia-smi sees them busy through a load file naming this pid. One cycle costs model time only."""
    if cycles == 1:
        return
    path = os.path.join(sandbox_root(), "run", "gpu-load", f"{os.getpid()}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"gpus": list(devices)}, fh)
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # killed: remove the load file on the way out
    try:
        n = 0
        while cycles == 0 or n < cycles:
            time.sleep(0.2)
            n += 1
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def main(argv: list[str]) -> int:
    o = _parse(argv)
    if o is None:
        return 1
    twin = load_twin()
    hw = twin["hardware"]
    nranks = int(o["nthreads"]) * int(o["ngpus"])
    if nranks > hw["gpu_count"]:
        sys.stdout.write(f"# nThread {o['nthreads']} nGpus {o['ngpus']} ...\n"
                         f"{socket.gethostname()}: Test CUDA failure common.cu:1030 'invalid device ordinal'\n")
        return 2
    dtype = o["datatype"]
    if dtype not in _TYPES:
        sys.stderr.write(f"invalid type {dtype}\n")
        return 1
    tsize = _TYPES[dtype]
    # A real all_reduce_perf is a C binary: no sitecustomize runs in it. Read the exec-time environment.
    exec_env = exec_environ()
    env = effective_nccl_env(exec_env, twin.get("nccl_conf_default"))
    # The devices it runs on (CUDA_VISIBLE_DEVICES decides which physical GPUs ranks 0..n-1 are): a
    # down-trained PCIe link among them lowers the bus bandwidth of the whole ring.
    devices = gpus_for(hw, exec_env, nranks)
    link = link_bw_factor(hw, devices)
    if len(devices) < nranks:
        sys.stdout.write(f"{socket.gethostname()}: Test CUDA failure common.cu:1030 'invalid device ordinal'\n")
        return 2
    minb, maxb = _size(o["minbytes"]), _size(o["maxbytes"])
    factor = float(o["stepfactor"])
    graph = int(o["cudagraph"])
    major, minor, patch = (twin["hardware"]["nccl"].split(".") + ["0", "0"])[:3]
    code = int(major) * 10000 + int(minor) * 100 + int(patch)
    w = sys.stdout.write
    if env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        host = socket.gethostname()
        w(f"{host}:{os.getpid()}:{os.getpid()} [0] NCCL INFO NCCL version {hw['nccl']}+cuda{hw['cuda']}\n")
        for key in sorted(env):
            if key.startswith("NCCL_") and key != "NCCL_DEBUG":
                w(f"{host}:{os.getpid()}:{os.getpid()} [0] NCCL INFO {key} set by environment to {env[key]}\n")
    w(f"# nccl-tests version 2.17.6 nccl-headers={code} nccl-library={code}\n")
    w("# Collective test starting: all_reduce_perf\n")
    w(f"# nThread {o['nthreads']} nGpus {o['ngpus']} minBytes {minb} maxBytes {maxb} "
      + (f"step: {o['stepbytes']}(bytes)" if factor <= 1 and o["stepbytes"] else f"step: {int(factor)}(factor)")
      + f" warmup iters: {o['warmup']} iters: {o['iters']} agg iters: {o['agg_iters']} validation: {o['check']} "
      f"graph: {graph}\n#\n# Using devices\n")
    for r in range(nranks):
        bus = hw["bus_ids"][devices[r] if r < len(devices) else r].split(":")
        w(f"#  Rank {r:2d} Group  0 Pid {os.getpid():6d} on {socket.gethostname():>10} device {r:2d} "
          f"[{bus[0][-4:]}:{bus[1].lower()}:00] {hw['gpu_name']}\n")
    w("#\n#                                                              out-of-place                       in-place"
      "          \n#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
      "algbw   busbw #wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
      "    (us)  (GB/s)  (GB/s)       \n")
    # seeded from the scenario and this sandbox's count of runs (the pid and Python's hash seed made the sweep's
    # finalists, and a test's outcome, differ from run to run)
    rng = random.Random(int(twin.get("seed", 0)) * 1000003 + 7919 * bump_counter(sandbox_root(), "nccltests")
                        + zlib.crc32(" ".join(argv).encode()))
    cv = float(twin["allreduce"].get("noise_cv", 0.02))
    rows, busbws = [], []
    size = minb
    while size <= maxb:
        count = size // tsize
        nbytes = count * tsize
        base = allreduce_us(twin["allreduce"], env, nbytes, nranks, hw["gpu_count"], link)
        if graph > 0:
            base *= 0.85
        res = []
        for _ in range(2):
            t = base * math.exp(rng.gauss(0, cv))
            algbw = nbytes / t / 1e3 if t > 0 else 0.0
            busbw = algbw * (2 * (nranks - 1) / nranks) if nranks > 1 else 0.0
            res.append((t, algbw, busbw))
        busbws.append(res[0][2])
        w(f"{nbytes:12d}  {count:12d}  {dtype:>8}  {o['op']:>6}  {-1:6d}"
          + "".join(f"  {_fmt_time(t)}  {a:6.2f}  {b:6.2f}  {0:5d}" for t, a, b in res) + "\n")
        rows.append({"size": nbytes, "count": count, "type": dtype, "redop": o["op"], "root": -1,
                     "out_of_place": {"time_us": res[0][0], "algbw_gbs": res[0][1], "busbw_gbs": res[0][2],
                                      "wrong": 0},
                     "in_place": {"time_us": res[1][0], "algbw_gbs": res[1][1], "busbw_gbs": res[1][2], "wrong": 0}})
        if factor > 1:
            size = int(size * factor)
        elif o["stepbytes"]:
            size += _size(o["stepbytes"])
        else:
            break
    _keep_busy(devices, int(o["run_cycles"] or "1"))
    avg = sum(busbws) / len(busbws) if busbws else 0.0
    w(f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:g} \n#\n")
    w("# Collective test concluded: all_reduce_perf\n\n")
    if o["json"]:
        with open(o["json"], "w", encoding="utf-8") as fh:
            json.dump({"nccl_tests_version": "2.17.6", "nccl_version": hw["nccl"], "collective": "all_reduce",
                       "nranks": nranks, "datatype": dtype, "op": o["op"], "graph": graph,
                       "env": {k: v for k, v in env.items() if k.startswith("NCCL_")},
                       "results": rows, "avg_busbw_gbs": avg}, fh, indent=1)
    return 0
