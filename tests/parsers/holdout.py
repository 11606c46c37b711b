"""Issue #33's hold-out: a third of each kind's samples set aside before the parsers were changed.

Rule (deterministic): within each fixture folder, files sorted by name, every third one (index 2, 5, 8, ...).
`python -m tests.parsers.holdout baseline|after` writes what the parsers read from every sample (critical fields
from cases.py, or the exception) to holdout_<phase>.json, so the aside third can be scored by reading the samples.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .cases import CASES, FIXTURES, fixture_text

__all__ = ["KIND_PARSERS", "kinds", "aside", "read_all"]

# Which parsers read each fixture folder (a folder of mixed kinds lists every parser that applies).
KIND_PARSERS: dict[str, tuple[str, ...]] = {
    "samples/git-diff-stat": ("git.parse_diff_stat",), "real/git-diff-stat": ("git.parse_diff_stat",),
    "samples/nvidia-smi-q": ("nvidia_smi.parse_q", "nvidia_smi.parse_list", "nvidia_smi_table.parse_smi_table"),
    "samples/nvidia-smi-topo": ("nvidia_smi.parse_topo",),
    "samples/sglang-bench": ("sglang_bench.parse_bench_serving", "sglang_bench.parse_bench_serving_jsonl",
                             "sglang_bench.parse_eagle_bench_lines"),
    "real/bench": ("sglang_bench.parse_bench_serving", "sglang_bench.parse_eagle_bench_lines",
                   "sglang_bench.parse_bench_one_batch_server"),
    "samples/sglang-json": ("sglang.parse_body",), "real/sglang_json": ("sglang.parse_body",),
    "samples/sglang-launch": ("sglang.parse_launch_command",), "real/sglang_launch": ("sglang.parse_launch_command",),
    "samples/sglang-logs": ("sglang.parse_decode_lines", "sglang_startup.parse_startup"),
    "real/sglang_logs": ("sglang.parse_decode_lines", "sglang_startup.parse_startup"),
    "real/check_env": ("sglang_check_env.parse_check_env",),
    "real/nccl_debug": ("nccl.parse_nccl_debug",),
    "nccl": ("nccl.parse_nccl_tests", "nccl.parse_nccl_debug", "nvidia_smi.parse_topo"),
    "real/nvidia-smi-table": ("nvidia_smi_table.parse_smi_table",),
    "real/server_args": ("sglang_server_args.parse_server_args",),
    "h200": ("nvidia_smi.parse_list", "nvidia_smi.parse_q", "nvidia_smi.parse_topo", "nccl.parse_nccl_tests"),
}


def kinds() -> dict[str, list[str]]:
    """Fixture folder -> its sample files (relative to tests/fixtures), sorted by name."""
    return {kind: sorted(str(p.relative_to(FIXTURES)) for p in (FIXTURES / kind).iterdir()
                         if p.is_file() and p.name != "README.md") for kind in KIND_PARSERS}


def aside() -> dict[str, list[str]]:
    """The hold-out third of each kind: index 2, 5, 8, ... of the sorted files."""
    return {kind: files[2::3] for kind, files in kinds().items()}


def _run(name: str, text: str) -> Any:
    case = next(c for c in CASES if c.name == name)
    try:
        return {"ok": repr(case.critical(case.parse(text)))[:600],
                "problems": [p[:120] for p in getattr(case.parse(text), "problems", [])][:5]}
    except Exception as exc:  # noqa: BLE001 - the baseline records whatever the old parsers raised
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def read_all() -> dict[str, dict[str, Any]]:
    """Every sample of every kind -> {parser: critical fields or error}, plus whether it is aside."""
    held = {f for files in aside().values() for f in files}
    out: dict[str, dict[str, Any]] = {}
    for kind, files in kinds().items():
        for rel in files:
            text = fixture_text(rel)
            out[rel] = {"aside": rel in held, **{name: _run(name, text) for name in KIND_PARSERS[kind]}}
    return out


if __name__ == "__main__":
    phase = sys.argv[1] if len(sys.argv) > 1 else "after"
    dest = Path(__file__).with_name(f"holdout_{phase}.json")
    dest.write_text(json.dumps({"rule": "per fixture folder, sorted by name, every third file (index 2, 5, 8, ...)",
                                "aside": aside(), "read": read_all()}, indent=1) + "\n", encoding="utf-8")
    print(dest)
