"""Runs specdoctor's read-only host tools on this machine (the GPU box) and keeps raw nvidia-smi outputs as fixtures.

Why: the tools and parsers were written against samples and a simulated host; this records what they make of a
real H200 (through LocalHost and the tool registry, exactly as an agent calls them), and saves the raw outputs
so parser tests can be pinned to them (tests/fixtures/h200/).

    python benchmarks/gpu_host_tools.py --json $OUT/host_tools.json --raw /tmp/gv/raw
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.host import open_host
from specdoctor.inference import get_engine
from specdoctor.toolkit import ToolContext, registry

__all__ = ["RAW_COMMANDS", "ToolRun", "HostToolsReport", "save_raw", "run_tools", "main"]

# file name -> nvidia-smi arguments; the query is the one tools/environment/fingerprint.py asks for, with a header row
RAW_COMMANDS: dict[str, list[str]] = {
    "nvidia-smi-L.txt": ["-L"],
    "nvidia-smi-query.csv": ["--query-gpu=index,name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,"
                             "clocks.mem,power.limit,pcie.link.gen.current,pcie.link.gen.max,"
                             "pcie.link.width.current,pcie.link.width.max,persistence_mode,memory.total",
                             "--format=csv"],
    "nvidia-smi-q.txt": ["-q"],
    "nvidia-smi-topo-m.txt": ["topo", "-m"],
    "nvidia-smi-topo-p2p.txt": ["topo", "-p2p", "p"],
    "nvidia-smi-apps.csv": ["--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
}


class ToolRun(BaseModel):
    """One tool call through the registry: its ToolResult as JSON, or why it was not run."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    registered: bool
    result: dict[str, Any] | None = None
    error: str | None = None


class HostToolsReport(BaseModel):
    """Everything the driver saw: the registered tools, each call, parser checks on the raw outputs."""

    tools: list[str]
    runs: list[ToolRun]
    parsers: dict[str, Any] = Field(default_factory=dict)
    raw_files: list[str] = Field(default_factory=list)
    seconds: float


def save_raw(folder: Path) -> list[str]:
    """Write each raw nvidia-smi output (stdout, and stderr when any) to `folder`; returns the file names."""
    folder.mkdir(parents=True, exist_ok=True)
    if not shutil.which("nvidia-smi"):
        (folder / "nvidia-smi-missing.txt").write_text("nvidia-smi not on PATH\n")
        return ["nvidia-smi-missing.txt"]
    names = []
    for name, argv in RAW_COMMANDS.items():
        res = subprocess.run(["nvidia-smi", *argv], capture_output=True, text=True, timeout=120, check=False)
        (folder / name).write_text(res.stdout + (f"\n# stderr (exit {res.returncode}):\n{res.stderr}"
                                                 if res.returncode or res.stderr.strip() else ""))
        names.append(name)
    return names


def _parse_checks(folder: Path) -> dict[str, Any]:
    """What specdoctor's nvidia-smi parsers make of the raw files (a failure here is a parser bug to fix)."""
    out: dict[str, Any] = {}
    try:
        from specdoctor.parsers import nvidia_smi as p
    except ImportError as exc:
        return {"import_error": str(exc)}
    checks = {"nvidia-smi-L.txt": lambda t: [e.model_dump() for e in p.parse_list(t)],
              "nvidia-smi-q.txt": lambda t: p.parse_q(t).model_dump(mode="json"),
              "nvidia-smi-topo-m.txt": lambda t: p.parse_topo(t).model_dump(mode="json")}
    for name, fn in checks.items():
        f = folder / name
        if not f.exists():
            continue
        try:
            out[name] = fn(f.read_text())
        except Exception as exc:  # recorded, not raised: the point is to see every parser's outcome
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def run_tools(calls: list[tuple[str, dict[str, Any]]], engine: str = "sglang") -> tuple[list[str], list[ToolRun]]:
    """Call each tool through the registry on LocalHost; an unregistered tool is recorded, not an error. The engine
    is named: the box may run no server (the lent GPU runs none), and then its processes cannot tell one."""
    host = open_host("local")
    ctx = ToolContext(host=host, run_id="gpu-validation", run_engine=get_engine(engine))
    names = [s.name for s in registry.all()]
    runs = []
    try:
        for name, args in calls:
            if name not in names:
                runs.append(ToolRun(tool=name, arguments=args, registered=False))
                continue
            try:
                res = registry.call(ctx, name, args)
                runs.append(ToolRun(tool=name, arguments=args, registered=True, result=res.model_dump(mode="json")))
            except Exception as exc:  # a host error: keep going, the other tools still tell something
                runs.append(ToolRun(tool=name, arguments=args, registered=True, error=f"{type(exc).__name__}: {exc}"))
    finally:
        host.close()
    return names, runs


def main(argv: list[str] | None = None) -> int:
    """Save the raw outputs, run host_facts, fingerprint and nccl_inventory, write one JSON report; exit 1 if a tool failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", required=True, help="where to write the report")
    ap.add_argument("--raw", required=True, help="folder for the raw nvidia-smi outputs")
    ap.add_argument("--python", default=sys.executable, help="python the tools report on (the one with torch)")
    ap.add_argument("--engine", choices=["sglang", "vllm"], default="sglang", help="the engine the tools read for")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    raw = Path(a.raw)
    files = save_raw(raw)
    names, runs = run_tools([("host_facts", {"python": a.python}), ("fingerprint", {"python": a.python}),
                             ("nccl_inventory", {"python": a.python, "tp": 1, "hidden_size": 2048, "draft_tokens": 4})],
                            a.engine)
    report = HostToolsReport(tools=names, runs=runs, parsers=_parse_checks(raw), raw_files=files,
                             seconds=round(time.perf_counter() - t0, 3))
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(report.model_dump_json(indent=2))
    for r in runs:
        status = r.result.get("status") if r.result else ("not registered" if not r.registered else r.error)
        summary = r.result.get("summary") if r.result else ""
        print(f"{r.tool}: {status}: {summary}")
    bad = [r for r in runs if r.error or (r.result and r.result.get("status") != "ok")]
    print(f"{len(names)} tools registered; raw files: {', '.join(files)}; report {a.json}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
