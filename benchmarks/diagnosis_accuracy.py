"""Diagnosis accuracy over the whole scenario corpus: does `investigate` reach each story's truth?

Run: `.venv/bin/python benchmarks/diagnosis_accuracy.py [--seeds 3] [--jobs 2] [--only NAME ...] [--json FILE]`.

Every scenario (built-in and corpus) is laid out once per noise seed (the scenario's seed + 1000*k) and
investigated in-process, like `specdoctor investigate --host sim:NAME --yes`. One row per scenario, aggregated
over its seeds: verdict right (k/N), culprit files right, innocent files blamed, causes named vs truth,
launches, wall seconds, and whether another user's server was examined or touched. Totals: verdict accuracy,
culprit precision/recall, wrong-culprit count. Exit status 1 when any verdict is wrong, any culprit list differs from
the truth's (an innocent file blamed or a culprit missed), a phase effect or a share is off, another user's server
was touched, the user's checkout was not left as found, or a run did not complete; 0 otherwise. Only this benchmark
and the tests read `truth`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

__all__ = ["Result", "Row", "aggregate", "cause_named", "main", "run_one"]


class Result(BaseModel):
    """One investigation of one scenario at one noise seed."""

    scenario: str
    seed: int
    verdict: str
    truth_verdict: str
    verdict_ok: bool
    blamed: list[str] = Field(default_factory=list)
    truth_culprits: list[str] = Field(default_factory=list)
    innocent_blamed: list[str] = Field(default_factory=list)
    causes_named: list[str] = Field(default_factory=list)
    causes_missed: list[str] = Field(default_factory=list)
    other_causes: list[str] = Field(default_factory=list, description="Confirmed non-code causes in the report's "
                                    "attribution that match no truth cause (to read: an innocent variable or flag?).")
    launches: int = 0
    launches_spared: int = Field(default=0, description="Launches the subtraction did not make because the "
                                 "essentials search had benchmarked the very same tree (one each, from its notes).")
    launches_expected: float | None = Field(default=None, description="What the plan expected before the stop "
                                            "(None: no plan was computed).")
    launches_worst: int | None = Field(default=None, description="The plan's worst case.")
    wall_s: float = 0.0
    other_server_touched: bool = False
    phase: str | None = Field(default=None, description="The culprit's attributed phase effect, when the truth names "
                              "one: 'verify +6.8 ms [6.5, 7.0]', or 'none'.")
    phase_ok: bool | None = Field(default=None, description="None: the truth checks no phase.")
    share: str | None = Field(default=None, description="The culprits' share against their confirming trial: "
                              "'-390.0 in [-395, -386]' (all patches minus every patch but them, 95 % CI).")
    share_ok: bool | None = Field(default=None, description="None: no code cause with a share, or no confirming "
                                  "trial in the report to check it against.")
    tree_changed: bool = Field(default=False, description="The user's checkout differs after the run (status with "
                               "untracked files, the diff against HEAD, the stash list): the box was not left as found.")
    status: str | None = Field(default=None, description="The report's run status ('complete' when it finished).")
    error: str | None = None


class Row(BaseModel):
    """A scenario's results over its seeds."""

    scenario: str
    runs: int
    verdicts_ok: int
    verdicts: list[str]
    truth_verdict: str
    culprits_ok: int
    innocent_blamed: list[str]
    causes: str
    other_causes: list[str] = Field(default_factory=list)
    phase: str = "-"
    share: str = "-"
    launches: float
    expected: float | None = None
    made_over_expected: float | None = None
    wall_s: float
    other_touched: int
    errors: list[str]


def _variants(name: str) -> list[str]:
    """How a cause may be spelled in a report: NCCL_PROTO, attention_backend / --attention-backend, pcie-link."""
    base = name.strip()
    out = {base, base.replace("_", "-"), base.replace("-", "_"), "--" + base.replace("_", "-"), base.replace("-", " ")}
    return sorted(v.lower() for v in out if v)


def cause_named(cause: dict, report_text: str, blamed: list[str]) -> bool:
    """A code cause is named when its file is blamed; any other when its name appears in the report's text."""
    if cause["kind"] == "code":
        return bool(cause.get("source")) and cause["source"] in blamed
    text = report_text.lower()
    return any(v in text for v in _variants(cause["name"]))


def other_causes(report: dict, truth_causes: list[dict]) -> list[str]:
    """The report's confirmed non-code causes that name none of the truth's (code causes: `innocent_blamed`)."""
    names = [v for t in truth_causes if t["kind"] != "code" for v in _variants(t["name"])]
    out = []
    for c in (report.get("attribution") or {}).get("causes") or []:
        text = str(c.get("name") or "")
        subject = text.split(";")[0].lower()  # what the cause is about: 'X=1 in the workers' env; removing X, Y restores'
        if c.get("confirmed", True) and c.get("kind") not in ("code", "commit") and not any(v in subject for v in names):
            out.append(text)
    return out


def innocent_commits(report: dict, culprit_subjects: list[str]) -> list[str]:
    """Upstream commits the attribution confirms as causes that are none of the truth's culprit commits."""
    out = []
    for c in (report.get("attribution") or {}).get("causes") or []:
        if c.get("kind") == "commit" and c.get("confirmed", True) and \
                not any(sub in str(c.get("name") or "") for sub in culprit_subjects):
            out.append(f"commit: {c.get('name')}")
    return out


def _effect_holds(e: dict, want: str, delta_ms: float | None, basis: str) -> bool:
    """One claimed phase effect against the truth: its phase read from the profiler on the expected basis (GPU time,
    or host time for a host stall), a CI that holds its estimate on the slow side, within a quarter of the truth's
    size (when the truth gives one), and on its basis the phase moved and no other did (for a host stall, no GPU
    time moved at all)."""
    if e.get("phase") != want or e.get("basis") != basis or not str(e.get("source") or "").startswith("profiler-gpu"):
        return False
    lo, hi = e.get("ci") or (None, None)
    if lo is None or hi is None or not 0 < lo <= e["delta_ms"] <= hi:
        return False
    if delta_ms is not None and abs(e["delta_ms"] - delta_ms) > 0.25 * abs(delta_ms):
        return False
    rows = {(d.get("phase"), d.get("basis")): bool(d.get("moved")) for d in e.get("phases") or []}
    if not rows.get((want, basis)) or not any(ph != want and b == basis for ph, b in rows):
        return False  # the phase did not move, or no other phase was read to be left alone
    return not any(m for (ph, b), m in rows.items() if (b == basis and ph != want) or (basis == "host" and b == "gpu"))


def _unit_line(md: str, want: str) -> bool:
    """The report's attribution line states the effect with its unit: '(draft +2.0 ms … per step', verify per cycle."""
    unit = "step" if want == "draft" else "cycle"
    return any(f"({want} +" in line and f"per {unit}" in line for line in md.splitlines())


def phase_check(report: dict, want: str, delta_ms: float | None = None, basis: str = "gpu",
                md: str | None = None) -> tuple[str, bool]:
    """The attribution's phase effects (confirmed causes) against the truth's phase: right when at least one is
    claimed and every one names `want` as `_effect_holds` asks (and, given the report's markdown, it states the
    effect per step or per cycle); for 'none', right when none is claimed."""
    effects = [c["phase_effect"] for c in (report.get("attribution") or {}).get("causes") or []
               if c.get("confirmed", True) and c.get("phase_effect")]
    got = "; ".join(f"{e.get('phase')} {e.get('delta_ms', 0.0):+.1f} ms" + (
        f" [{e['ci'][0]:.1f}, {e['ci'][1]:.1f}]" if len(e.get("ci") or []) == 2 else "") for e in effects)
    if want == "none":
        return got or "none", not effects
    ok = bool(effects) and all(_effect_holds(e, want, delta_ms, basis) for e in effects) and \
        (md is None or _unit_line(md, want))
    return got or "none", ok


def share_check(report: dict) -> tuple[str | None, bool | None]:
    """The code cause's share against its confirming comparison, recomputed from the report's bisection trials:
    the tree with every patch minus the tree with every patch but the culprits (both measured by trials). Right when
    the share lies in that difference's 95 % CI. (None, None): no share or no such pair of trials to check."""
    from specdoctor.stats.summary import diff_of_medians_ci

    culprits = set((report.get("stash") or {}).get("culprits") or [])
    att = report.get("attribution") or {}
    # the diagnosis' own shares; a gap read off the claims and the stash (`derived`) carries no per-cause share
    causes = [c for c in att.get("causes") or [] if not att.get("derived")
              and c.get("kind") == "code" and c.get("confirmed", True) and not c.get("metric")]
    trials = [t for t in report.get("bisection") or [] if len(t.get("samples") or []) >= 2]
    if not culprits or not causes or not trials:
        return None, None
    every = set().union(*(set(t["patches"]) for t in trials)) | culprits
    without = next((t for t in trials if set(t["patches"]) == every - culprits), None)
    if without is None:
        return "no trial of the tree without the culprits", None
    stash = {m.get("label"): m for m in (report.get("stash") or {}).get("measurements") or []}
    full = next((t for t in trials if set(t["patches"]) == every), None) or stash.get("all patches")
    if full is None or len(full.get("samples") or []) < 2:
        return "no measurement of the tree with every patch", None
    want = statistics.median(full["samples"]) - statistics.median(without["samples"])
    lo, hi = diff_of_medians_ci(without["samples"], full["samples"])
    # independent culprits (the effect search's additive fit) each carry their own share: together they are the
    # comparison; a set confirmed together carries one share, the same on each member
    fitted = [c for c in causes if "additive fit" in str(c.get("share_from") or "")]
    got = sum(c["delta"] for c in fitted) if len(fitted) > 1 else causes[0]["delta"]
    ok = lo - 0.05 <= got <= hi + 0.05  # the report rounds shares to 0.01
    return f"{got:+.1f} vs {want:+.1f} [{lo:+.1f}, {hi:+.1f}]", ok


def _report_text(report: dict) -> str:
    """What the report concludes: summary, findings and game plan. Not the decisions' echo of tool outputs (a
    launch line or an env dump there mentions every flag and variable without naming it as a cause)."""
    parts: list[str] = [str(report.get("summary") or "")]
    for f in report.get("findings") or []:
        parts += [str(f.get("title") or ""), str(f.get("detail") or "")]
    for g in report.get("game_plan") or []:
        parts.append(json.dumps(g) if not isinstance(g, str) else g)
    return "\n".join(parts)


from specdoctor.engine.actions.subtract import SEARCHED_NOTE as SPARED  # noqa: E402  (one wording, two readers)


def spared_launches(report: dict) -> int:
    """Trees the subtraction took from the essentials search's benchmarks instead of launching them."""
    return sum(str(d.get("found") or "").count(SPARED) for d in report.get("decisions") or []
               if d.get("step") == "subtract")


def _launches(audit: Path) -> int:
    """Server launches in the audit, by the product's own mark (`report.run_facts.LAUNCH_MARK`, what the report's
    `launches_made` counts). The engine's name anywhere in a `setsid` command is no mark: a vLLM scenario's paths
    hold "vllm", so the port holder (`nohup python -c '…os.setsid()…'`) counted as a launch on every vLLM story."""
    from specdoctor.report.run_facts import LAUNCH_MARK

    if not audit.is_file():
        return 0
    entries = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
    return sum(1 for e in entries if LAUNCH_MARK in e.get("command", ""))


def _access_lines(log: Path) -> int:
    """HTTP requests another server has answered (its uvicorn-style access lines), except /health probes: the
    layout's own readiness probe is logged after its answer, so counting it would race."""
    if not log.is_file():
        return 0
    return sum(1 for line in log.read_text(errors="replace").splitlines()
               if ' HTTP/1.1" ' in line and '"GET /health HTTP' not in line)


def run_one(name: str, k: int) -> Result:
    """Lay the scenario out with noise seed k, investigate it in-process, compare with its truth."""
    from specdoctor.engine.runner import InvestigateOptions, investigate
    from specdoctor.sim import SimHost, build_sandbox, load_scenario

    sc = load_scenario(name)
    sc.seed = sc.seed + 1000 * k
    truth = sc.truth
    out = Path(tempfile.mkdtemp(prefix=f"sd-acc-{Path(name).stem}-{k}-"))
    t0 = time.perf_counter()
    res = Result(scenario=name, seed=sc.seed, verdict="error", truth_verdict=truth.verdict, verdict_ok=False,
                 truth_culprits=sorted(truth.culprit_files))
    try:
        sandbox = build_sandbox(sc)
    except Exception as exc:  # a scenario that cannot be laid out is a benchmark failure, not a crash
        res.error = f"layout: {exc}"[:300]
        return res
    host = SimHost(sandbox)
    others_before = sandbox.other_server_pids()
    other_logs = [Path(o.log.replace("{root}", str(sandbox.root))) for o in sc.other_servers]
    access_before = [_access_lines(p) for p in other_logs]
    tree_before = sandbox.checkout_state(host)
    try:
        outcome = investigate(InvestigateOptions(host=f"sim:{name}", yes=True, out=str(out)), host=host)
        res.verdict = outcome.verdict
    except Exception as exc:  # the agent crashing is a wrong verdict; record why
        res.error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        res.wall_s = time.perf_counter() - t0
        alive = {p for p in sandbox.other_server_pids()}
        res.other_server_touched = bool(others_before) and (
            set(others_before) != alive or [_access_lines(p) for p in other_logs] != access_before)
        res.tree_changed = sandbox.checkout_state(host) != tree_before
        host.close()
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    res.status = (report.get("meta") or {}).get("status")
    stash = report.get("stash") or {}
    res.blamed = sorted(stash.get("culprits") or [])
    res.innocent_blamed = sorted(set(res.blamed) - set(truth.culprit_files))
    text = _report_text(report)
    subjects = {c.id: c.subject for c in sc.sglang.history}
    for cause in truth.causes:
        label = f"{cause.kind}:{cause.name}"
        named = subjects.get(cause.name, "\0") in text if cause.kind == "commit" else \
            cause_named(cause.model_dump(), text, res.blamed)
        (res.causes_named if named else res.causes_missed).append(label)
    res.innocent_blamed += innocent_commits(report, [subjects[c] for c in truth.culprit_commits])
    res.other_causes = other_causes(report, [c.model_dump() for c in truth.causes if c.kind != "commit"])
    res.launches = _launches(out / "audit.jsonl")
    res.launches_spared = spared_launches(report)
    plan = report.get("plan") or {}
    if plan:
        res.launches_expected = plan.get("launches_expected")
        res.launches_worst = plan.get("launches_max")
    if truth.phase_effect is not None:
        basis = "host" if any(e.verify_host_ms or e.draft_host_ms for e in sc.perf.effects) else "gpu"
        md_path = out / "report.md"
        res.phase, res.phase_ok = phase_check(report, truth.phase_effect.phase, truth.phase_effect.delta_ms, basis,
                                              md_path.read_text() if md_path.is_file() else "")
    res.share, res.share_ok = share_check(report)
    res.verdict_ok = res.verdict == truth.verdict
    return res


def aggregate(results: list[Result]) -> list[Row]:
    """One row per scenario (in first-seen order)."""
    by: dict[str, list[Result]] = {}
    for r in results:
        by.setdefault(r.scenario, []).append(r)
    rows = []
    for name, rs in by.items():
        named = sum(len(r.causes_named) for r in rs)
        total = sum(len(r.causes_named) + len(r.causes_missed) for r in rs)
        rows.append(Row(
            scenario=name, runs=len(rs), verdicts_ok=sum(r.verdict_ok for r in rs),
            verdicts=sorted({r.verdict for r in rs}), truth_verdict=rs[0].truth_verdict,
            culprits_ok=sum(r.blamed == r.truth_culprits for r in rs),
            innocent_blamed=sorted({f for r in rs for f in r.innocent_blamed}),
            causes=f"{named}/{total}" if total else "-",
            other_causes=sorted({c for r in rs for c in r.other_causes}),
            phase=(f"{sum(bool(r.phase_ok) for r in rs)}/{len(rs)}" if any(r.phase_ok is not None for r in rs)
                   else "-"),
            share=(f"{sum(bool(r.share_ok) for r in rs)}/{sum(r.share_ok is not None for r in rs)}"
                   if any(r.share_ok is not None for r in rs) else "-"),
            launches=sum(r.launches for r in rs) / len(rs), expected=_mean_expected(rs),
            made_over_expected=made_over_expected(sum(r.launches for r in rs) / len(rs), _mean_expected(rs)),
            wall_s=sum(r.wall_s for r in rs) / len(rs),
            other_touched=sum(r.other_server_touched for r in rs), errors=sorted({r.error for r in rs if r.error})))
    return rows


def _mean_expected(rs: list[Result]) -> float | None:
    known = [r.launches_expected for r in rs if r.launches_expected is not None]
    return sum(known) / len(known) if known else None


def made_over_expected(made: float, expected: float | None) -> float | None:
    """Launches made ÷ expected before the stop; 1.0 when none was expected and none made (None: no plan)."""
    if expected is None:
        return None
    if expected == 0:
        return 1.0 if made == 0 else float("inf")
    return made / expected


def within_plan(rows: list[Row], low: float = 0.67, high: float = 1.5) -> tuple[int, int]:
    """(rows whose made ÷ expected lies in [low, high], rows with a plan)."""
    planned = [r for r in rows if r.made_over_expected is not None]
    return sum(low <= (r.made_over_expected or 0.0) <= high for r in planned), len(planned)


def _totals(results: list[Result]) -> dict[str, float | int]:
    blamed = sum(len(r.blamed) for r in results)
    right = sum(len(set(r.blamed) & set(r.truth_culprits)) for r in results)
    truth = sum(len(r.truth_culprits) for r in results)
    return {"runs": len(results), "verdict_accuracy": sum(r.verdict_ok for r in results) / max(len(results), 1),
            "culprit_precision": right / blamed if blamed else 1.0,
            "culprit_recall": right / truth if truth else 1.0,
            "wrong_culprits": sum(len(r.innocent_blamed) for r in results),
            "causes_named": sum(len(r.causes_named) for r in results),
            "phases_wrong": sum(r.phase_ok is False for r in results),
            "shares_wrong": sum(r.share_ok is False for r in results),
            "causes_total": sum(len(r.causes_named) + len(r.causes_missed) for r in results),
            "other_server_touched": sum(r.other_server_touched for r in results),
            "trees_changed": sum(r.tree_changed for r in results),
            "culprits_wrong": sum(r.blamed != r.truth_culprits for r in results),
            "incomplete": sum(r.status != "complete" for r in results),
            "launches": sum(r.launches for r in results),
            "launches_spared": sum(r.launches_spared for r in results)}


def _table(rows: list[Row]) -> str:
    header = ("scenario", "verdict ok", "verdict (truth)", "culprits ok", "innocent blamed", "causes",
              "other causes", "phase ok", "share ok", "launches", "expected", "made ÷ exp", "wall s", "other srv")
    lines = [header]
    for r in rows:
        got = ",".join(r.verdicts)
        lines.append((r.scenario, f"{r.verdicts_ok}/{r.runs}", f"{got} ({r.truth_verdict})", f"{r.culprits_ok}/{r.runs}",
                      ",".join(Path(f).name for f in r.innocent_blamed) or "-", r.causes,
                      "; ".join(r.other_causes) or "-", r.phase, r.share, f"{r.launches:.1f}",
                      "-" if r.expected is None else f"{r.expected:.1f}",
                      "-" if r.made_over_expected is None else f"{r.made_over_expected:.2f}",
                      f"{r.wall_s:.0f}", "TOUCHED" if r.other_touched else "-"))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def _run_parallel(tasks: list[tuple[str, int]], jobs: int, done) -> None:
    """Each run in its own interpreter (`--one`), at most `jobs` at a time; Ctrl-C reaches them as SIGINT, so
    every running investigation stops and removes its sandbox before we return."""
    pending = list(tasks)
    running: dict[subprocess.Popen, tuple[str, int, Path]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="sd-acc-results-"))
    try:
        while pending or running:
            while pending and len(running) < jobs:
                name, k = pending.pop(0)
                out = tmp / f"{Path(name).stem}-{k}.json"
                proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--one", name, str(k), str(out)])
                running[proc] = (name, k, out)
            time.sleep(0.5)
            for proc in [p for p in running if p.poll() is not None]:
                name, k, out = running.pop(proc)
                if out.is_file():
                    done(Result.model_validate_json(out.read_text()))
                else:
                    done(Result(scenario=name, seed=k, verdict="error", truth_verdict="?", verdict_ok=False,
                                error=f"run exited {proc.returncode} without a result"))
    except KeyboardInterrupt:
        for proc in running:
            proc.send_signal(signal.SIGINT)
        for proc in running:
            proc.wait()
        raise


def main(argv: list[str] | None = None) -> int:
    from specdoctor.sim import list_scenarios

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="noise seeds per scenario (default 3)")
    ap.add_argument("--jobs", type=int, default=1, help="scenarios investigated in parallel (default 1)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these scenarios (a name, or a scenario file)")
    ap.add_argument("--json", metavar="FILE", help="also write every result as JSON")
    ap.add_argument("--one", nargs=3, metavar=("NAME", "K", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:  # one run in this interpreter (what --jobs starts); SIGTERM stops it like Ctrl-C
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        res = run_one(args.one[0], int(args.one[1]))
        Path(args.one[2]).write_text(res.model_dump_json())
        return 0
    known = [n for n, _ in list_scenarios(include_corpus=True)]
    names = args.only or known
    unknown = [n for n in names if n not in known and not (n.endswith((".yaml", ".yml")) and Path(n).is_file())]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.jobs < 1:
        print("--seeds and --jobs must be at least 1", file=sys.stderr)
        return 2
    os.environ.setdefault("SPECDOCTOR_HOME", tempfile.mkdtemp(prefix="sd-acc-home-"))
    # Seed-major: every scenario at seed 0 first, so an interrupted run still covers the whole corpus.
    tasks = [(n, k) for k in range(args.seeds) for n in names]
    t0 = time.perf_counter()
    results: list[Result] = []

    def done(r: Result) -> None:
        results.append(r)
        print(f"  [{len(results)}/{len(tasks)}] {r.scenario} seed {r.seed}: {r.verdict} "
              f"({'ok' if r.verdict_ok else 'WRONG'}) {r.wall_s:.0f}s", file=sys.stderr, flush=True)
        if args.json:  # written as results arrive: a long run that is stopped keeps what it measured
            Path(args.json).write_text(json.dumps({"results": [x.model_dump() for x in results]}, indent=1))

    try:
        if args.jobs == 1:
            for n, k in tasks:
                done(run_one(n, k))
        else:
            _run_parallel(tasks, args.jobs, done)
    except KeyboardInterrupt:  # stop launching; what finished is reported (each run cleans its own sandbox up)
        print("interrupted: the table covers the runs that finished", file=sys.stderr)
    if not results:
        return 1
    rows = aggregate(results)
    totals = _totals(results)
    print(_table(rows))
    print()
    print(f"verdict accuracy {totals['verdict_accuracy']:.0%} over {totals['runs']} runs; culprit precision "
          f"{totals['culprit_precision']:.2f}, recall {totals['culprit_recall']:.2f}; wrong culprits "
          f"{totals['wrong_culprits']}; phases wrong {totals['phases_wrong']}; shares off their confirming trial {totals['shares_wrong']}; causes named {totals['causes_named']}/{totals['causes_total']}; other users' "
          f"servers touched {totals['other_server_touched']}; checkouts not left as found {totals['trees_changed']}; "
          f"runs not complete {totals['incomplete']}; {time.perf_counter() - t0:.0f} s")
    made, spared = totals["launches"], totals["launches_spared"]
    print(f"launches made {made}; spared by the essentials search's benchmarks {spared} in "
          f"{sum(r.launches_spared > 0 for r in results)} runs (made / (made + spared) = "
          f"{made / max(made + spared, 1):.3f})")
    inside, planned = within_plan(rows)
    print(f"made ÷ expected within [0.67, 1.5] for {inside}/{planned} stories with a plan; mean launches "
          f"{made / max(len(results), 1):.2f} per run")
    if args.json:
        Path(args.json).write_text(json.dumps({"totals": totals, "results": [r.model_dump() for r in results]},
                                              indent=1))
    bad = (totals["verdict_accuracy"] < 1.0 or totals["wrong_culprits"] > 0 or totals["other_server_touched"] > 0
           or totals["trees_changed"] > 0 or totals["incomplete"] > 0 or totals["culprits_wrong"] > 0
           or totals["phases_wrong"] > 0 or totals["shares_wrong"] > 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
