"""Run dependencies (never checkpointed): host, tool context, view callbacks, advisor, options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from specdoctor.host.base import Host
from specdoctor.toolkit import ToolContext

__all__ = ["EngineView", "NullView", "RunDeps"]


class EngineView(Protocol):
    """What the engine tells the face (the CLI's live view); the engine itself never prints."""

    def start(self, plan: list[tuple[str, str, str, str]]) -> None: ...

    def step_started(self, step_id: str) -> None: ...

    def step_finished(self, step_id: str, status: str, summary: str) -> None: ...

    def progress(self, message: str, done: int | None = None, total: int | None = None) -> None: ...


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
    view: Any = field(default_factory=NullView)
    advisor: Any = None
    out_dir: Path | None = None
    yes: bool = False
    dry_run: bool = False
    playbook: Any = None
