"""Reliability and security figures (issue #10) in one run: faults, hostile inputs, secrets, bad input.

Run: `.venv/bin/python benchmarks/reliability_report.py [--quick] [--json]` (as root the SSH side logs in as
`sdtest`). It starts its own loopback sshd (specdoctor.testing) and reuses the campaigns of tests/reliability/:
  faults      SSH link dropped in backup/stash/apply/launch/benchmark/restore → tree byte-identical? orphans?
  hostile     hypothesis strings in every tool's string arguments (LocalHost as an unprivileged user + SSH)
  secrets     HF/OpenAI/AWS tokens and a URL password in a simulated server's env → any in the outputs?
  bad input   wrong hosts/keys/host keys/specs/options/files at the CLI + invalid tool calls → one line each?
  states      awkward checkouts (ignored by an uncommitted .gitignore, assume-unchanged, CRLF, 0600, empty dirs,
              non-UTF-8 names, 200 MB untracked, dirty submodule, ...) through trial trees → manifest identical?
  at rest     planted secrets (server env, shell env, a corpus of real shapes through the checkpointer) → found
              anywhere on disk after the run (run folder, SPECDOCTOR_HOME, the host's ~/.specdoctor)?
  lock        concurrent runs on one checkout (real processes, LocalHost and SSH) → exactly one runs?
  investigate-states  each state in a scenario checkout through a whole investigate (subtraction + bisection in
              trial trees) → manifest identical, the run's own proof agreeing, no trial tree left?
  kills       SIGKILL at 10 seeded moments over whole runs (trials included), then resume → manifest identical,
              no orphans, the user's server back (same identity: argv, env, cwd, user) and healthy?
Goals: 100 % trees identical, 0 shell escapes, 0 secrets leaked, every bad input a one-line error,
100 % states identical, 0 secrets at rest, every concurrent run but one refused.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from reliability.badinput import run_bad_campaign  # noqa: E402
from reliability.faults import run_fault_campaign, sshd_connect  # noqa: E402
from reliability.hostile import run_campaign, run_local_campaign, ssh_budget, ssh_probe_factory  # noqa: E402
from reliability.invalid_calls import run_invalid_campaign  # noqa: E402
from reliability.kill_campaign import run_kill_campaign  # noqa: E402
from reliability.lock_campaign import race  # noqa: E402
from reliability.secrets_campaign import grep_secrets, run_host_folder_campaign, run_secret_campaign  # noqa: E402
from reliability.states_campaign import run_state_campaign  # noqa: E402
from reliability.test_secret_corpus import corpus  # noqa: E402

from specdoctor.testing import start_sshd  # noqa: E402

__all__ = ["Figure", "Report", "collect", "main"]


class Figure(BaseModel):
    """One line of the table: what was tried, how many met the goal, and whether the goal holds."""

    campaign: str
    tried_label: str
    tried: int
    result_label: str
    result: int
    goal: str
    met: bool
    notes: str = ""
    seconds: float = 0.0


class Report(BaseModel):
    """Every figure of one run."""

    figures: list[Figure]

    @property
    def all_met(self) -> bool:
        return all(f.met for f in self.figures)


CAMPAIGNS = ("faults", "hostile", "secrets", "bad", "states", "at-rest", "lock", "investigate-states", "kills")


def collect(quick: bool = False, only: set[str] | None = None) -> Report:
    """Run the campaigns (all, or `only` those named) against a private sshd and the twin."""
    figures: list[Figure] = []

    def want(name: str) -> bool:
        return only is None or name in only

    sshd = start_sshd()
    tmp = Path(tempfile.mkdtemp(prefix="sd-reliability-"))
    try:
        figures += _run_figures(sshd, tmp, quick, want)
    finally:
        sshd.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return Report(figures=figures)


def _run_figures(sshd, tmp: Path, quick: bool, want) -> list[Figure]:
    figures: list[Figure] = []
    if want("faults"):
        t0 = time.perf_counter()
        faults = run_fault_campaign(sshd_connect(sshd), str(sshd.workdir), per_phase=2 if quick else 4)
        by_phase: dict[str, int] = {}
        for o in faults.outcomes:
            by_phase[o.fault.phase] = by_phase.get(o.fault.phase, 0) + 1
        figures.append(Figure(
            campaign="fault injection (SSH drops)", tried_label="faults injected", tried=faults.injected,
            result_label="trees restored byte-identical", result=faults.identical, goal="100 %, 0 orphans",
            met=faults.identical == faults.injected and faults.orphans == 0,
            notes=f"orphan servers {faults.orphans}; per phase {by_phase}", seconds=time.perf_counter() - t0))

    if want("hostile"):
        t0 = time.perf_counter()
        local = run_local_campaign(scale=0.3 if quick else 1.0)
        ssh = run_campaign(ssh_probe_factory(sshd), ssh_budget)
        cases = local.cases + ssh.cases
        escapes = len(local.escapes) + len(ssh.escapes)
        figures.append(Figure(
            campaign="hostile inputs (every tool)", tried_label="hostile inputs tried", tried=len(cases),
            result_label="shell escapes", result=escapes, goal="0", met=escapes == 0 and not ssh.altered
            and not local.crashes and not ssh.crashes,
            notes=(f"LocalHost {len(local.cases)} + SSH {len(ssh.cases)}; argv/env altered over SSH "
                   f"{len(ssh.altered)}; crashes {len(local.crashes) + len(ssh.crashes)}; "
                   f"{local.commands + ssh.commands} commands; {len(local.tools_covered())} tools"),
            seconds=time.perf_counter() - t0))

    if want("secrets"):
        t0 = time.perf_counter()
        secret = run_secret_campaign(tmp / "secrets")
        figures.append(Figure(
            campaign="secrets in server envs", tried_label="secrets planted", tried=secret.planted,
            result_label="leaked", result=len(secret.leaks), goal="0",
            met=not secret.leaks and secret.exit_code == 0 and secret.read_env,
            notes=(f"{secret.places_searched} places searched (terminal, reports, audit, checkpoints); "
                   f"decoy sglang::scheduler_TP0 {'survived' if secret.decoy_alive else 'KILLED'}; "
                   f"verdict {secret.verdict}"), seconds=time.perf_counter() - t0))

    if want("bad"):
        t0 = time.perf_counter()
        (tmp / "bad").mkdir()
        bad = run_bad_campaign(sshd, tmp / "bad")
        invalid = run_invalid_campaign()
        ok_bad = sum(o.one_line for o in bad)
        ok_invalid = sum(1 for r in invalid if r.status == "error" and not r.ran)
        figures.append(Figure(
            campaign="bad input (CLI + tool calls)", tried_label="bad-input cases", tried=len(bad) + len(invalid),
            result_label="one-line errors / refused", result=ok_bad + ok_invalid, goal="all",
            met=ok_bad == len(bad) and ok_invalid == len(invalid),
            notes=f"CLI {ok_bad}/{len(bad)} one-line with exit code; tool calls {ok_invalid}/{len(invalid)} "
                  "refused with nothing run", seconds=time.perf_counter() - t0))

    figures += _safety_figures(sshd, tmp, quick, want)
    figures += _run_figures_19(tmp, quick, want)
    return figures


def _checkpoint_corpus(tmp: Path) -> tuple[int, list[str]]:
    """Every corpus secret in a real LangGraph state checkpointed to SQLite: (planted, found in the files)."""
    import os

    from langgraph.graph import END, START, StateGraph

    from specdoctor.engine.runs import open_checkpointer

    pairs = corpus()

    def node(state: dict) -> dict:
        return {"log": [line for line, _ in pairs]}

    g = StateGraph(dict)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    db = tmp / "corpus.sqlite"
    saved = os.environ.get("SPECDOCTOR_HOME")
    with open_checkpointer(str(db)) as saver:
        g.compile(checkpointer=saver).invoke({"log": []}, {"configurable": {"thread_id": "corpus"}})
    if saved is not None:
        os.environ["SPECDOCTOR_HOME"] = saved
    places = {p.name: p.read_bytes() for p in tmp.glob("corpus.sqlite*")}
    return len(pairs), grep_secrets({f"corpus{i}": s for i, (_l, s) in enumerate(pairs)}, places)


def _safety_figures(sshd, tmp: Path, quick: bool, want) -> list[Figure]:
    """Issue #19: checkout states (manifest), secrets at rest, concurrent runs."""

    figures: list[Figure] = []
    if want("states"):
        figures.append(_states_figure(sshd, tmp, quick))
    if want("at-rest"):
        figures.append(_at_rest_figure(tmp))
    if want("lock"):
        figures.append(_lock_figure(sshd, tmp, quick))
    return figures


def _states_figure(sshd, tmp: Path, quick: bool) -> Figure:
    from specdoctor.host import LocalHost

    t0 = time.perf_counter()
    work = tmp / "states"
    (work / "home").mkdir(parents=True)
    local = run_state_campaign(LocalHost(base_env={"HOME": str(work / "home")}), str(work))
    with sshd.connect(base_env={"HOME": f"{sshd.workdir}/states-home"}) as h:
        h.run(["mkdir", "-p", f"{sshd.workdir}/states-home"])
        remote = run_state_campaign(h, str(sshd.workdir), ["all", "submodule-local-changes"] if quick else None)
    tried, same = local.tried + remote.tried, local.identical + remote.identical
    return Figure(
        campaign="checkout states (trial trees)", tried_label="states tried", tried=tried,
        result_label="manifest identical", result=same, goal="100 %",
        met=same == tried and local.exact_identical + remote.exact_identical == local.exact_tried + remote.exact_tried
        and local.in_place_caught + remote.in_place_caught == local.in_place_changed + remote.in_place_changed,
        notes=(f"LocalHost {local.identical}/{local.tried}, SSH {remote.identical}/{remote.tried}; in-place path "
               f"with a first-round backup changed {local.in_place_changed + remote.in_place_changed} states "
               f"(expected ≥ {local.expected_in_place_losses + remote.expected_in_place_losses}), manifest named "
               f"the change in {local.in_place_caught + remote.in_place_caught}; with this round's exact backup "
               f"{local.exact_identical + remote.exact_identical}/{local.exact_tried + remote.exact_tried} "
               f"identical; differences: "
               f"{ {**local.differences, **remote.differences} or 'none'}"), seconds=time.perf_counter() - t0)


def _at_rest_figure(tmp: Path) -> Figure:
    t0 = time.perf_counter()
    disk = run_host_folder_campaign(tmp / "at-rest")
    n_corpus, corpus_leaks = _checkpoint_corpus(tmp)
    found = len(disk.leaks) + len(corpus_leaks)
    return Figure(
        campaign="secrets at rest (whole disk)", tried_label="secrets planted", tried=disk.planted + n_corpus,
        result_label="found on disk", result=found, goal="0", met=found == 0 and disk.read_env,
        notes=(f"investigate: {disk.planted} env secrets, {disk.places_searched} files searched (run folder, "
               f"SPECDOCTOR_HOME, host ~/.specdoctor), verdict {disk.verdict}; checkpointer: {n_corpus} corpus "
               f"shapes; leaks {disk.leaks + corpus_leaks or 'none'}"), seconds=time.perf_counter() - t0)


def _lock_figure(sshd, tmp: Path, quick: bool) -> Figure:
    from specdoctor.host import LocalHost

    t0 = time.perf_counter()
    repo = tmp / "lock-repo"
    (tmp / "lock-home").mkdir()
    LocalHost().run(["git", "init", "-q", str(repo)])
    races = [race(str(repo), 6, {"kind": "local", "home": str(tmp / "lock-home")}) for _ in range(1 if quick else 3)]
    ssh_repo, ssh_home = f"{sshd.workdir}/lock-repo", f"{sshd.workdir}/lock-home"
    with sshd.connect() as h:
        h.run(["mkdir", "-p", ssh_home])
        h.run(["git", "init", "-q", ssh_repo])
    spec = {"kind": "ssh", "ssh": {"hostname": sshd.host, "user": sshd.user, "port": sshd.port,
                                   "identity_files": [str(sshd.key_path)], "known_hosts": str(sshd.known_hosts),
                                   "allow_agent": False, "ssh_config": str(sshd.root / "ssh_config"),
                                   "base_env": {"HOME": ssh_home}}}
    races.append(race(ssh_repo, 4, spec))
    tried = sum(r.tried for r in races)
    refused = sum(r.refused for r in races)
    good = all(r.won == 1 and r.refused == r.tried - 1 and r.named_holder == r.refused and not r.errors
               for r in races)
    return Figure(
        campaign="concurrent runs (checkout lock)", tried_label="concurrent runs", tried=tried,
        result_label="refused", result=refused, goal="all but one per race", met=good,
        notes=f"{len(races)} races (LocalHost x{len(races) - 1}, SSH x1); one winner each: "
              f"{[r.won for r in races]}; refusals naming the holder {sum(r.named_holder for r in races)}",
        seconds=time.perf_counter() - t0)


def _run_figures_19(tmp: Path, quick: bool, want) -> list[Figure]:
    """Issue #19 on whole runs: each state through a full investigate on the twin; SIGKILL + resume."""
    figures: list[Figure] = []
    if want("investigate-states"):
        t0 = time.perf_counter()
        runs = _investigate_states(tmp / "inv-states", quick)
        same = sum(r.identical and r.proof_identical is True and not r.trees_left and r.error is None for r in runs)
        full = sum(r.subtracted and r.bisected for r in runs)
        figures.append(Figure(
            campaign="checkout states (full investigate)", tried_label="states tried", tried=len(runs),
            result_label="manifest identical", result=same, goal="100 %, each subtracted and bisected",
            met=same == len(runs) and full == len(runs),
            notes=(f"scenario {INVESTIGATE_SCENARIO}, one run per state (quick: all in one checkout); "
                   f"subtracted and bisected {full}/{len(runs)}; verdicts "
                   f"{sorted({r.verdict or '?' for r in runs})}; failures "
                   f"{ {'+'.join(r.states): (r.error or r.differences or r.trees_left) for r in runs if not r.identical or r.error or r.trees_left} or 'none'}; "
                   f"{sum(r.seconds for r in runs):.0f} s of runs"), seconds=time.perf_counter() - t0))
    if want("kills"):
        t0 = time.perf_counter()
        camp = run_kill_campaign(INVESTIGATE_SCENARIO, tmp / "kills", kills=3 if quick else 10)
        bad = [k for k in camp.kills if not k.recovered]
        figures.append(Figure(
            campaign="SIGKILL + resume (whole runs)", tried_label="kills", tried=len(camp.kills),
            result_label="recovered", result=camp.recovered,
            goal="all: manifest identical, 0 orphans, user's server the same", met=not bad,
            notes=(f"killed in steps {[k.step for k in camp.kills]} (+{[round(k.after_s, 1) for k in camp.kills]} s), "
                   f"at {[round(k.at_s) for k in camp.kills]} s into the run; with a trial tree on disk "
                   f"{sum(k.in_trial for k in camp.kills)}; manifest identical "
                   f"{sum(k.identical for k in camp.kills)}; orphans {sum(len(k.orphans) for k in camp.kills)}; "
                   f"user's server the same {sum(k.user_server_same for k in camp.kills)}; failures "
                   f"{[(k.step, k.error) for k in bad] or 'none'} (with --yes the user's server is stopped for "
                   "the trials and restarted: 'the same' is its identity — argv, env, cwd, user — back and healthy)"),
            seconds=time.perf_counter() - t0))
    return figures


INVESTIGATE_SCENARIO = "single-culprit"
"""The cheapest scenario whose run both subtracts and bisects (a confirmed single culprit)."""


def _investigate_states(work: Path, quick: bool):
    from reliability.investigate_states import investigate_states
    from reliability.test_investigate_states import COMBINED

    from specdoctor.sim import SimHost, build_sandbox, load_scenario

    groups = [COMBINED] if quick else [[s] for s in COMBINED]
    out = []
    for i, states in enumerate(groups):
        host = SimHost(build_sandbox(load_scenario(INVESTIGATE_SCENARIO), work / f"box{i}"))
        try:
            out.append(investigate_states(host, host.sandbox.repo, states, work / f"out{i}"))
        finally:
            host.close()
    return out


def render(report: Report) -> str:
    """The table the issue asks for."""
    rows = [("campaign", "tried", "result", "goal", "met", "s")]
    for f in report.figures:
        rows.append((f.campaign, f"{f.tried_label}: {f.tried}", f"{f.result_label}: {f.result}", f.goal,
                     "yes" if f.met else "NO", f"{f.seconds:.0f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines += [f"{f.campaign}: {f.notes}" for f in report.figures]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="Smaller campaigns (for a smoke run).")
    ap.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    ap.add_argument("--only", default=None, help=f"Comma-separated campaigns: {', '.join(CAMPAIGNS)}.")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    if only and only - set(CAMPAIGNS):
        ap.error(f"unknown campaign(s): {', '.join(sorted(only - set(CAMPAIGNS)))}")
    report = collect(quick=args.quick, only=only)
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return 0 if report.all_met else 1


if __name__ == "__main__":
    sys.exit(main())
