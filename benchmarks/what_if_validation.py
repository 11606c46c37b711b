"""What-if validation: for every corpus story where a trial measured a lever, the game plan's modelled gain against
the gain the trial measured (median absolute error ≤ 15 %, each case listed).

    python benchmarks/what_if_validation.py --only cuda-graph-disabled-flag steps-cut nccl-win --seeds 1 \
        --out benchmarks/results/what_if_validation.md

Each story is investigated in-process on the twin (real processes, real git, loopback HTTP); the rows come from its
report.json: an action that carries both `modelled_gain` (the what-if model, from the run's phase times and the
break-even model, never from the trial) and `measured_gain` (the revert trial, the NCCL A/B). A story whose trial
measured a lever the model does not cover is listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

LIMIT_PCT = 15.0


class Case(BaseModel):
    """One story's lever: modelled against measured (tok/s on the speculative figure)."""

    scenario: str
    seed: int
    verdict: str
    lever: str | None = None
    action: str = ""
    modelled: float | None = None
    low: float | None = None
    high: float | None = None
    measured: float | None = None
    error_pct: float | None = None
    note: str = ""
    wall_s: float = 0.0


def run_one(name: str, k: int) -> list[Case]:
    """Investigate one story (noise seed k) and read its levers' modelled and measured gains from report.json."""
    from specdoctor.engine.runner import InvestigateOptions, investigate
    from specdoctor.sim import SimHost, build_sandbox, load_scenario

    sc = load_scenario(name)
    sc.seed = sc.seed + 1000 * k
    out = Path(tempfile.mkdtemp(prefix=f"sd-whatif-{name}-{k}-"))
    t0 = time.perf_counter()
    host = SimHost(build_sandbox(sc))
    try:
        verdict = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(out)), host=host).verdict
    finally:
        host.close()
    wall = time.perf_counter() - t0
    report = json.loads((out / "report.json").read_text())
    cases = []
    for a in report.get("game_plan") or []:
        if a.get("measured_gain") is None or a.get("modelled_gain") is None:
            continue
        meas, mod = float(a["measured_gain"]), float(a["modelled_gain"])
        cases.append(Case(scenario=name, seed=sc.seed, verdict=verdict, lever=a.get("lever"), action=a["title"],
                          modelled=mod, low=a.get("gain_low"), high=a.get("gain_high"), measured=meas,
                          error_pct=100.0 * abs(mod - meas) / abs(meas) if meas else None, wall_s=wall))
    if not cases:
        att = report.get("attribution") or {}
        causes = ", ".join(f"{c.get('name')} ({att.get('metric')})" for c in att.get("causes") or []) or "none"
        modelled = [x for x in report.get("game_plan") or [] if x.get("modelled_gain") is not None]
        for x in modelled:  # a lever the model covers, whose trial (if any) measured another figure
            cases.append(Case(scenario=name, seed=sc.seed, verdict=verdict, lever=x.get("lever"), action=x["title"],
                              modelled=x["modelled_gain"], low=x.get("gain_low"), high=x.get("gain_high"),
                              wall_s=wall, note=f"not compared: no trial measured it on the speculative figure "
                                                f"(confirmed causes: {causes})"))
        if not modelled:
            cases.append(Case(scenario=name, seed=sc.seed, verdict=verdict, wall_s=wall,
                              note=f"no lever of the model here (confirmed causes: {causes})"))
    return cases


def table(cases: list[Case]) -> str:
    """The markdown table, one row per case, and the median absolute error over the cases with both figures."""
    head = ("| story | seed | verdict | lever | modelled tok/s [range] | measured tok/s | abs error | note |\n"
            "|---|---|---|---|---|---|---|---|\n")
    rows = []
    for c in cases:
        rng = f" [{c.low:+.1f}, {c.high:+.1f}]" if c.low is not None and c.high is not None else ""
        mod = f"{c.modelled:+.1f}{rng}" if c.modelled is not None else "—"
        meas = f"{c.measured:+.1f}" if c.measured is not None else "—"
        err = f"{c.error_pct:.1f} %" if c.error_pct is not None else "—"
        note = re.sub(r"/tmp/specdoctor-sim-[^/\s]+", "<sandbox>", c.note or c.action)
        rows.append(f"| {c.scenario} | {c.seed} | {c.verdict} | {c.lever or '—'} | {mod} | {meas} | {err} | {note} |")
    errs = [c.error_pct for c in cases if c.error_pct is not None]
    summary = (f"\nMedian absolute error over {len(errs)} measured levers: {statistics.median(errs):.1f} % "
               f"(limit {LIMIT_PCT:g} %): {'PASS' if statistics.median(errs) <= LIMIT_PCT else 'FAIL'}\n"
               if errs else "\nNo lever was both modelled and measured.\n")
    return head + "\n".join(rows) + "\n" + summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", required=True, metavar="NAME", help="the stories to run (ones whose trial "
                    "measures a lever: cuda-graph-disabled-flag steps-cut nccl-win nccl-conf-simple ...)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--out", metavar="FILE", help="write the markdown table here")
    ap.add_argument("--one", nargs=3, metavar=("NAME", "K", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        cases = run_one(args.one[0], int(args.one[1]))
        Path(args.one[2]).write_text(json.dumps([c.model_dump() for c in cases]))
        return 0
    os.environ.setdefault("SPECDOCTOR_HOME", tempfile.mkdtemp(prefix="sd-whatif-home-"))
    cases: list[Case] = []
    for k in range(args.seeds):
        for name in args.only:
            try:
                got = run_one(name, k)
            except Exception as exc:  # a story that cannot run is listed, not dropped
                got = [Case(scenario=name, seed=k, verdict="error", note=f"{type(exc).__name__}: {exc}"[:200])]
            cases += got
            for c in got:
                print(f"  {c.scenario} seed {c.seed}: {c.lever or '-'} modelled {c.modelled} measured {c.measured} "
                      f"({c.wall_s:.0f}s) {c.note}", file=sys.stderr, flush=True)
    text = table(cases)
    print(text)
    if args.out:
        Path(args.out).write_text("# What-if validation: modelled against measured lever gains\n\n"
                                  "`python benchmarks/what_if_validation.py --only " + " ".join(args.only)
                                  + f" --seeds {args.seeds}` (the twin; tok/s on the speculative figure)\n\n" + text)
    errs = [c.error_pct for c in cases if c.error_pct is not None]
    return 0 if errs and statistics.median(errs) <= LIMIT_PCT else 1


if __name__ == "__main__":
    sys.exit(main())
