"""specdoctor's phase times from a real SGLang trace, next to the same figures read by hand (#31).

    python benchmarks/real_sglang/phase_hand_read.py TRACE.trace.json.gz [SERVER.log] [--steps K]

Hand read, without specdoctor's parser: the torch profiler projects each `user_annotation` range onto the GPU
stream as a `gpu_user_annotation` of the same name; their durations are the phases' GPU time per occurrence
(median over the trace). From the server log, the `Decode batch` lines give a whole-cycle figure: accept length /
gen throughput (a 40-step window's mean, batch 1), which includes the scheduler's CPU time between cycles.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
from pathlib import Path

from specdoctor.parsers.sglang_trace import parse_sglang_trace
from specdoctor.tools.serving.phase_times import phases_from_trace

_DECODE = re.compile(r"Decode batch.*?accept len: ([\d.]+).*?gen throughput \(token/s\): ([\d.]+)")


def hand_read(trace: Path) -> dict[str, tuple[int, float]]:
    """name → (count, median ms) of the GPU projections of SGLang's ranges."""
    events = json.load(gzip.open(trace, "rt"))["traceEvents"]
    spans: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") == "gpu_user_annotation" and e.get("ph") == "X":
            name = re.sub(r" bs=\d+", "", e["name"])
            spans.setdefault(name, []).append(e["dur"] / 1000.0)
    return {n: (len(v), statistics.median(v)) for n, v in spans.items()
            if n in ("draft", "draft_extend", "scheduler.run_batch") or n.startswith("step[")}


def log_cycle(log: Path) -> tuple[int, float, float] | None:
    """(lines, median accept length, median ms per cycle) from the server's decode lines."""
    rows = [(float(a), float(t)) for a, t in _DECODE.findall(log.read_text(errors="replace")) if float(t) > 0]
    if not rows:
        return None
    return len(rows), statistics.median(a for a, _ in rows), statistics.median(1000.0 * a / t for a, t in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("log", type=Path, nargs="?")
    ap.add_argument("--steps", type=int, default=3, help="--speculative-num-steps of the server")
    a = ap.parse_args()
    pt = phases_from_trace(parse_sglang_trace(a.trace.read_bytes()), a.steps, str(a.trace))
    hand = hand_read(a.trace)
    print(f"| figure | specdoctor (phase_times, {pt.source}) | by hand (gpu_user_annotation medians) |")
    print("|---|---|---|")
    for label, stat, key in (("draft, whole cycle (k steps)", pt.draft_cycle_ms, "draft"),
                             ("verify (step[TARGET_VERIFY])", pt.verify_ms, "step[TARGET_VERIFY]"),
                             ("draft-extend", pt.draft_extend_ms, "draft_extend")):
        mine = f"{stat.ms:.3f} ms [{stat.ci[0]:.3f}, {stat.ci[1]:.3f}], n={len(stat.samples)}" if stat else "—"
        n, med = hand.get(key, (0, float("nan")))
        print(f"| {label} | {mine} | {med:.3f} ms, n={n} |")
    if pt.draft_ms:
        print(f"| draft per step (/k={a.steps}) | {pt.draft_ms.ms:.3f} ms | {hand.get('draft', (0, 0))[1] / a.steps:.3f} ms |")
    if pt.cycle_ms:
        n, med = hand.get("scheduler.run_batch", (0, float("nan")))
        print(f"| cycle (draft + verify + draft-extend) | {pt.cycle_ms.ms:.3f} ms | run_batch on the GPU {med:.3f} ms, n={n} |")
    if a.log and (lc := log_cycle(a.log)):
        print(f"| cycle from the server log (accept len / gen tok/s) | — | {lc[2]:.3f} ms "
              f"(accept {lc[1]:.2f}, {lc[0]} decode lines; includes CPU time between cycles) |")


if __name__ == "__main__":
    main()
