"""What a whole investigation costs on each built-in scenario: wall time, launches, requests, host commands.

Run: `.venv/bin/python benchmarks/investigate_cost.py [scenario ...]` — one table, one run, plus whether the
verdict and culprits match the scenario's truth (which only this benchmark and the tests read).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from specdoctor.engine.runner import InvestigateOptions, investigate
from specdoctor.sim import list_scenarios, load_scenario, open_sim_host


def _count(audit: Path) -> dict[str, int]:
    entries = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    launches = sum(1 for e in entries if "setsid" in e["command"] and "sglang" in e["command"])
    return {"commands": len(entries), "launches": launches}


def _requests(root: Path) -> int:
    """/generate requests the simulated servers answered (their uvicorn-style access lines), health probes excluded."""
    total = 0
    for log in root.rglob("*.log"):
        total += sum(1 for line in log.read_text(errors="replace").splitlines() if '"POST /generate' in line)
    return total


def main(names: list[str]) -> int:
    os.environ.setdefault("SPECDOCTOR_HOME", tempfile.mkdtemp(prefix="sd-cost-home-"))
    names = names or [n for n, _ in list_scenarios()]
    rows = []
    for name in names:
        truth = load_scenario(name).truth
        out = Path(tempfile.mkdtemp(prefix=f"sd-cost-{name}-"))
        t0 = time.perf_counter()
        with open_sim_host(name) as host:
            outcome = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(out)), host=host)
            wall = time.perf_counter() - t0
            requests = _requests(host.sandbox.root)
        report = json.loads((out / "report.json").read_text())
        counts = _count(out / "audit.jsonl")
        culprits = sorted(report.get("stash", {}).get("culprits", []) if report.get("stash") else [])
        ok = outcome.verdict == truth.verdict and culprits == sorted(truth.culprit_files)
        bisect = [d for d in report["decisions"] if d["step"] == "bisect" and d["status"] == "ok"]
        rows.append((name, f"{wall:.1f}", counts["launches"], requests, counts["commands"],
                     outcome.verdict, ",".join(culprits) or "-", "yes" if ok else "NO",
                     bisect[0]["found"][:60] if bisect else "-"))
    header = ("scenario", "wall s", "launches", "requests", "host cmds", "verdict", "culprits", "= truth",
              "bisection")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
    return 0 if all(r[7] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
