"""Run dependencies (never checkpointed): host, tool context, view callbacks, advisor, options."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from specdoctor.diagnosis import PlanAction, Verdict
from specdoctor.engine.playbook import Playbook
from specdoctor.engine.state import RunState
from specdoctor.host.base import Host
from specdoctor.models import StateReader
from specdoctor.toolkit import ToolContext, ToolResult

__all__ = ["Advisor", "EngineView", "NullView", "RunDeps"]


class EngineView(Protocol):
    """What the engine tells the face (the CLI's live view); the engine itself never prints."""

    def start(self, plan: list[tuple[str, str, str, str]]) -> None: ...

    def step_started(self, step_id: str) -> None: ...

    def step_finished(self, step_id: str, status: str, summary: str) -> None: ...

    def progress(self, message: str, done: int | None = None, total: int | None = None) -> None: ...


class Advisor(Protocol):
    """An optional advisor beside the rules (the LLM advisor): prose and guesses, never a measured number."""

    model: str

    def narrate(self, view: StateReader, verdict: Verdict, plan: list[PlanAction]) -> BaseModel | None:
        """A narrative for the report's opening (marked LLM-made), or None."""
        ...

    def triage_unknown(self, files: list[dict[str, Any]]) -> list[BaseModel]:
        """Subsystem guesses for changed files the rules could not classify."""
        ...

    def explore(self, view: StateReader, call_read_tool: Callable[[str, dict[str, Any]], ToolResult],
                schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Call read-only tools within a budget; the trail of `{tool, args, summary}`."""
        ...


class NullView:
    """A view that shows nothing (library use, tests)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def start(self, plan: list[tuple[str, str, str, str]]) -> None:
        self.events.append(("start", plan))

    def step_started(self, step_id: str) -> None:
        self.events.append(("started", step_id))

    def step_finished(self, step_id: str, status: str, summary: str) -> None:
        self.events.append(("finished", (step_id, status, summary)))

    def progress(self, message: str, done: int | None = None, total: int | None = None) -> None:
        self.events.append(("progress", message))


@dataclass
class RunDeps:
    """Everything a node needs at run time; rebuilt by `resume` from the run's saved options."""

    host: Host
    tool_ctx: ToolContext
    view: EngineView = field(default_factory=NullView)
    advisor: Advisor | None = None
    out_dir: Path | None = None
    yes: bool = False
    dry_run: bool = False
    playbook: Playbook | None = None
    record: RunState | None = None
    """The typed run record after the last step this process ran (the checkpoint's twin, not read back)."""

    def record_for(self, checkpoint: Mapping[str, Any]) -> RunState:
        """The typed record of `checkpoint`: the one this process made when it is that checkpoint's (same run, same
        steps done), else read from the checkpoint once (a resume, another process)."""
        rec = self.record
        if rec is not None and rec.run_id == (checkpoint.get("run_id") or "") and rec.done == list(
                checkpoint.get("done") or []):
            return rec
        return RunState.from_checkpoint(checkpoint)
