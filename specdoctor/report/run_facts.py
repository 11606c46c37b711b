"""The report parts read from the run as a whole: the dry-run plan, how the box was left, launches made."""

from __future__ import annotations

from specdoctor.diagnosis.facts import RunFacts
from specdoctor.models.box import BoxLeftFact
from specdoctor.report.model import PlannedStep, Report

__all__ = ["LAUNCH_MARK", "count_launches", "add_run_facts"]

LAUNCH_MARK = "setsid nohup "
"""launch_server (tools/serving/launch.py) starts every server — trial, baseline, restart of the user's — with this
prefix in one audited command, so counting it counts launches whichever step made them."""

PLAN_ONLY_SUMMARY = ("dry run: plan only — nothing was launched, benchmarked, swept or changed, so there is no "
                     "verdict; the steps below list the commands a real run would execute")


def count_launches(report: Report) -> int:
    return sum(LAUNCH_MARK in e.command for e in report.commands)


def add_run_facts(report: Report, facts: RunFacts, *, dry_run: bool) -> None:
    """Fill `dry_run`, `box` and `launches_made`; a dry run's verdict is plan-only and it has no game plan. (A fact
    of another shape never gets here: the record's facts are validated when it is read.)"""
    server, checkout = facts.user_server, facts.checkout_proof
    if server is not None or checkout is not None:
        report.box = BoxLeftFact(server=server, checkout=checkout)
    report.launches_made = count_launches(report)
    planned = facts.dry_run or {}
    report.dry_run = [PlannedStep.model_validate(v) for v in planned.values() if isinstance(v, dict)]
    if dry_run:
        report.verdict, report.confidence, report.summary = "plan-only", None, PLAN_ONLY_SUMMARY
        report.game_plan = []
