"""What a whole investigation costs on each built-in scenario: wall time, launches (the restart of the user's server
included), modelled box minutes (what the real box would spend: each start-up as its log times it, plus the decode time
of every benchmark request), runs per arm, requests, host commands.

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
from specdoctor.parsers.sglang_startup import parse_startup
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


def _startups_s(root: Path) -> float:
    """Model seconds of every start-up in the sandbox's server logs (a log appended to by a restart holds two)."""
    total = 0.0
    for log in root.rglob("*.log"):
        text = log.read_text(errors="replace")
        for part in text.split("server_args=")[1:]:
            t = parse_startup("[2000-01-01 00:00:00] server_args=" + part)
            total += (t.load_weight_s or 0.0) + (t.cuda_graph_s or 0.0)
    return total


def _arms(report: dict) -> tuple[int, float | None]:
    """(most runs any compared arm got, median tok/s over the measurements) from report.json."""
    arms = [m for m in (report.get("stash") or {}).get("measurements") or [] if m.get("samples")]
    runs = max((len(m["samples"]) for m in arms), default=0)
    medians = sorted(m["median"] for m in [*report.get("measurements", []), *arms] if m.get("median"))
    return runs, (medians[len(medians) // 2] if medians else None)


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
            startups = _startups_s(host.sandbox.root)
        report = json.loads((out / "report.json").read_text())
        counts = _count(out / "audit.jsonl")
        culprits = sorted(report.get("stash", {}).get("culprits", []) if report.get("stash") else [])
        ok = outcome.verdict == truth.verdict and culprits == sorted(truth.culprit_files)
        bisect = [d for d in report["decisions"] if d["step"] == "bisect" and d["status"] == "ok"]
        runs, tps = _arms(report)
        decode_s = requests * 128 / tps if tps else 0.0  # the playbook's max_new_tokens per request
        box_min = (startups + decode_s + 10.0 * counts["launches"]) / 60  # + a stop per launch (plan's estimate)
        rows.append((name, f"{wall:.1f}", counts["launches"], f"{box_min:.1f}", runs or "-", requests,
                     counts["commands"], outcome.verdict, ",".join(culprits) or "-", "yes" if ok else "NO",
                     bisect[0]["found"][:60] if bisect else "-"))
    header = ("scenario", "wall s", "launches", "box min", "runs/arm", "requests", "host cmds", "verdict", "culprits",
              "= truth", "bisection")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
    return 0 if all(r[9] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
