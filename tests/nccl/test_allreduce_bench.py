"""tools/remote/allreduce_bench.py for real: torchrun, world size 2, torch's gloo backend on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specdoctor.parsers.nccl import parse_all_reduce
from specdoctor.toolkit import registry
from specdoctor.tools.nccl.nccl import NcclSweep

SCRIPT = Path(__file__).resolve().parents[2] / "specdoctor" / "tools" / "remote" / "allreduce_bench.py"


def _torchrun(*extra: str) -> str:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(SCRIPT),
            "--backend", "gloo", "--sizes", "14336,43008,1K", "-n", "3", "-w", "1", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                                  "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_world_size_two_gloo(fmt):
    text = _torchrun("--json") if fmt == "json" else _torchrun()
    if fmt == "json":
        doc = json.loads(text)
        assert doc["tool"] == "allreduce_bench" and doc["config"]["ngpus"] == 2
    run = parse_all_reduce(text)
    assert run.collective == "all_reduce" and run.tool == "allreduce_bench" and run.ngpus == 2
    assert [r.size for r in run.rows] == [1024, 14336, 43008]
    assert [r.count for r in run.rows] == [512, 7168, 21504]  # bf16
    for row in run.rows:
        assert row.dtype == "bfloat16" and row.redop == "sum"
        assert row.out_of_place is None or row.out_of_place.time_us is None  # in place only, like SGLang's TP
        assert row.in_place.wrong == 0 and row.time_us > 0
        assert row.in_place.busbw == pytest.approx(row.in_place.algbw, rel=0.02)  # 2(n−1)/n = 1 at n = 2
    assert run.out_of_bounds == 0


def test_sizes_sweep_like_nccl_tests():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from allreduce_bench import parse_sizes
    finally:
        sys.path.pop(0)
    assert parse_sizes(None, "8", "64", 2) == [8, 16, 32, 64]
    assert parse_sizes("2K,1k, 8", "8", "8", 2) == [8, 1024, 2048]


def test_sweep_falls_back_to_the_harness(bare_ctx):
    res = registry.call(bare_ctx, "nccl_sweep", {"sizes": [14336, 43008], "tp": 2, "interconnect": "pcie",
                                                 "grid": {"NCCL_PROTO": [None]}, "repeats": 1, "iters": 2,
                                                 "warmup": 1, "backend": "gloo", "python": sys.executable})
    assert res.ok, res.summary
    sweep = NcclSweep.model_validate(res.output)
    assert sweep.tool == "allreduce_bench" and len(sweep.results) == 1
    assert all(p.latency_us and p.latency_us > 0 for p in sweep.results[0].points)
    assert any("torch.distributed.run" in e.command and "allreduce_bench.py" in e.command for e in res.evidence)
    shipped = list(Path(bare_ctx.host.home()).glob(".specdoctor/remote/*/allreduce_bench.py"))
    assert shipped and shipped[0].read_bytes() == SCRIPT.read_bytes()
