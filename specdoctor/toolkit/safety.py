"""The one safety net: stop the servers a run started and put every backed-up tree back, verified."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.host.redact import redact_text
from specdoctor.toolkit.context import ToolContext
from specdoctor.toolkit.registry import ToolRegistry, registry

__all__ = ["SafetyStep", "safety_net", "restore_hint"]


class SafetyStep(BaseModel):
    """One safety action and how it ended (each is attempted even when another failed)."""

    tool: str
    repo: str | None = None
    ok: bool
    status: str = Field(description="The tool's status, or 'error' when it raised.")
    summary: str
    output: dict[str, Any] | None = None
    evidence: list[str] = Field(default_factory=list, description="Commands the call ran.")


def restore_hint(repo: str, backup_id: str) -> str:
    """How a user finishes a failed restore by hand."""
    return f"run `specdoctor restore --host HOST --repo {repo} --backup {backup_id}`"


def safety_net(ctx: ToolContext, backups: Mapping[str, str], *, reg: ToolRegistry = registry) -> list[SafetyStep]:
    """Stop every server group this run started (stop_server, recorded PIDs only), then restore each backup.

    The run as a whole was approved, so these calls run pre-approved. A failure of one step never skips the
    next: the tree matters more than a stray server, and one repo's failed restore must not leave another.
    """
    ctx = dataclasses.replace(ctx, auto_approve=True)
    names = {s.name for s in reg.all()}
    plan: list[tuple[str, str | None, dict[str, Any]]] = []
    if "stop_server" in names:
        plan.append(("stop_server", None, {}))
    if "restore_worktree" in names:
        plan += [("restore_worktree", repo, {"repo": repo, "backup_id": bid}) for repo, bid in backups.items()]
    steps: list[SafetyStep] = []
    for tool, repo, args in plan:
        try:
            r = reg.call(ctx, tool, args)
            steps.append(SafetyStep(tool=tool, repo=repo, ok=r.ok, status=r.status, summary=r.summary,
                                    output=r.output, evidence=[e.command for e in r.evidence]))
        except Exception as exc:  # noqa: BLE001 - keep going; the failure is reported, never swallowed
            steps.append(SafetyStep(tool=tool, repo=repo, ok=False, status="error",
                                    summary=redact_text(f"{type(exc).__name__}: {exc}")))
    return steps
