"""`specdoctor.investigate(host, ...)`: the whole playbook from Python, returning where the report went."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specdoctor.engine.runner import Approver, RunOutcome

__all__ = ["investigate"]


def investigate(host: str, *, yes: bool = False, view: Any = None, approver: Approver | None = None,
                **options: Any) -> RunOutcome:
    """Run a playbook (default `regression`) on `host` and write report.md/json/html; return the RunOutcome.

    `options` are `InvestigateOptions` fields (repo, python, launch, expect, out, playbook, llm, ...).
    Consent works as on the command line: a step that changes the box (backing up and stashing patches,
    stopping your server for trial launches) runs only with `yes=True` (the CLI's `--yes`) or when
    `approver(payload) -> bool` says yes to it (the CLI's prompt). Without either, each such step is declined,
    as the CLI declines it when nobody answers, and the run reports what the read-only steps found. Whatever was
    approved, the engine backs the tree up first, restores it (verified), stops its own servers and restarts
    yours on every path.
    """
    from specdoctor.engine.runner import InvestigateOptions
    from specdoctor.engine.runner import investigate as run_playbook
    from specdoctor.errors import UsageError
    from specdoctor.host import parse_host_spec

    unknown = sorted(set(options) - set(InvestigateOptions.model_fields))
    if unknown:  # the options model ignores extras: a typo would silently run with defaults
        raise UsageError(f"unknown investigate option(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(sorted(set(InvestigateOptions.model_fields) - {'host', 'yes'}))}")
    parse_host_spec(host)  # a bad spec fails before anything is written
    return run_playbook(InvestigateOptions(host=host, yes=yes, **options), view=view, approver=approver)
