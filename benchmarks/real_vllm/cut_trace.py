"""Cut a real vLLM rank trace into a small CI fixture: the first N decode steps, only the events the phase reader
keys on, no machine paths.

Kept: the Python frames the reader matches (engine step, model runner execute_model / sample, a spec_decode
propose, the rejection sampler) and the first frame of every other vLLM source file (what ran), every CUDA runtime/driver call (name, thread, time, correlation) and every GPU
event (kernel, memcpy, memset: name, time, correlation), within the window from the first decode step's start to
the end of the N-th; the process-name metadata. Frame names lose everything before the package's `vllm/` (the
checkout's path), kernel and frame args are dropped except `correlation`.

    python benchmarks/real_vllm/cut_trace.py RANK_TRACE.json.gz OUT.json.gz [--cycles 12]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

from specdoctor.parsers.vllm_trace import FRAME_PHASE, parse_vllm_trace

_KEEP_FRAME = re.compile(r"vllm/v1/(?:engine/core\.py\(\d+\): (?:step|step_with_batch_queue)$|"
                         r".*rejection_sampler\.py\(\d+\): (?:__call__|forward)$)")
_SOURCE = re.compile(r"(?:^|/)(vllm/(?!vllm/)[\w/]+\.py)\(\d+\): ")  # the package's path, not the checkout's
_LAUNCH = ("cuda_runtime", "cuda_driver")
_GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def _slim(e: dict[str, Any]) -> dict[str, Any]:
    out = {k: e[k] for k in ("ph", "cat", "name", "pid", "tid", "ts", "dur") if k in e}
    corr = (e.get("args") or {}).get("correlation")
    if corr is not None:
        out["args"] = {"correlation": corr}
    if e.get("cat") == "python_function":
        m = _SOURCE.search(str(e["name"]))
        assert m is not None, e["name"]
        out["name"] = str(e["name"])[m.start(1):]
    return out


def cut(data: bytes, cycles: int) -> dict[str, Any]:
    """The trace's first `cycles` decode steps, slimmed."""
    doc = json.loads(gzip.decompress(data))
    trace = parse_vllm_trace(data)
    decode = sorted({r.cycle for r in trace.ranges if r.decode_cycle and r.cycle is not None})[:cycles]
    lo, hi = trace.batch_starts_ms[decode[0]] * 1000.0, trace.batch_ends_ms[decode[-1]] * 1000.0
    kept: list[dict[str, Any]] = []
    corr: set[Any] = set()
    seen: set[str] = set()  # one frame per source file: what ran (VLLMTrace.ran_files), not how often
    for e in doc["traceEvents"]:
        cat, ts = e.get("cat"), e.get("ts")
        if e.get("ph") == "M" and e.get("name") == "process_name":
            kept.append({"ph": "M", "name": "process_name", "pid": e.get("pid"), "args": {"name": "vllm worker"}})
        elif not isinstance(ts, (int, float)) or not lo <= ts <= hi:
            continue
        elif cat == "python_function" and (_KEEP_FRAME.search(e["name"]) or
                                           any(p.search(e["name"]) for p, _ in FRAME_PHASE)):
            kept.append(_slim(e))
        elif cat == "python_function" and (m := _SOURCE.search(e["name"])) and m[1] not in seen:
            seen.add(m[1])
            kept.append(_slim(e))
        elif cat in _LAUNCH:
            kept.append(_slim(e))
            corr.add((e.get("args") or {}).get("correlation"))
    # GPU work launched in the window (it may run after the window's last frame closed)
    kept += [_slim(e) for e in doc["traceEvents"] if e.get("cat") in _GPU
             and (e.get("args") or {}).get("correlation") in corr]
    return {"traceEvents": kept, "displayTimeUnit": "ms", "note": f"cut from a real vLLM 0.26.0 rank trace: "
            f"{len(decode)} decode steps, reader events only (benchmarks/real_vllm/cut_trace.py)"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--cycles", type=int, default=12)
    a = ap.parse_args()
    doc = cut(a.src.read_bytes(), a.cycles)
    a.out.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), 9, mtime=0))
    print(f"{a.out}: {len(doc['traceEvents'])} events, {a.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
