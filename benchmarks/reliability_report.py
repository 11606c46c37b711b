"""Reliability and security figures (issue #10) in one run: faults, hostile inputs, secrets, bad input.

Run: `.venv/bin/python benchmarks/reliability_report.py [--quick] [--json]` (as root the SSH side logs in as
`sdtest`). It starts its own loopback sshd (specdoctor.testing) and reuses the campaigns of tests/reliability/:
  faults      SSH link dropped in backup/stash/apply/launch/benchmark/restore → tree byte-identical? orphans?
  hostile     hypothesis strings in every tool's string arguments (LocalHost as an unprivileged user + SSH)
  secrets     HF/OpenAI/AWS tokens and a URL password in a simulated server's env → any in the outputs?
  bad input   wrong hosts/keys/host keys/specs/options/files at the CLI + invalid tool calls → one line each?
Goals: 100 % trees identical, 0 shell escapes, 0 secrets leaked, every bad input a one-line error.
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
from reliability.secrets_campaign import run_secret_campaign  # noqa: E402

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


def collect(quick: bool = False) -> Report:
    """Run the four campaigns against a private sshd and the twin."""
    figures: list[Figure] = []
    sshd = start_sshd()
    tmp = Path(tempfile.mkdtemp(prefix="sd-reliability-"))
    try:
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

        t0 = time.perf_counter()
        secret = run_secret_campaign(tmp / "secrets")
        figures.append(Figure(
            campaign="secrets in server envs", tried_label="secrets planted", tried=secret.planted,
            result_label="leaked", result=len(secret.leaks), goal="0",
            met=not secret.leaks and secret.exit_code == 0 and secret.read_env,
            notes=(f"{secret.places_searched} places searched (terminal, reports, audit, checkpoints); "
                   f"decoy sglang::scheduler_TP0 {'survived' if secret.decoy_alive else 'KILLED'}; "
                   f"verdict {secret.verdict}"), seconds=time.perf_counter() - t0))

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
    finally:
        sshd.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return Report(figures=figures)


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
    args = ap.parse_args(argv)
    report = collect(quick=args.quick)
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return 0 if report.all_met else 1


if __name__ == "__main__":
    sys.exit(main())
