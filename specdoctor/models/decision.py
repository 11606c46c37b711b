"""One entry of the decisions log, as the engine records it and the report shows it."""

from __future__ import annotations

import time

from pydantic import Field

from specdoctor.models.base import StrictModel

__all__ = ["Decision"]


class Decision(StrictModel):
    """What was checked, found, decided, and why — with the commands run as evidence.

    The engine fills `evidence` (the commands, shell-quoted); the report adds `command_ids` (indices into
    `Report.commands`) so a reader can jump from a decision to the exact command and its output.
    """

    step: str
    title: str = ""
    tool: str | None = None
    status: str = "ok"
    checked: str = ""
    found: str = ""
    decided: str = ""
    why: str = ""
    evidence: list[str] = Field(default_factory=list, description="Commands run, as shell-quoted strings.")
    command_ids: list[int] = Field(default_factory=list, description="Indices into Report.commands.")
    llm_made: bool = False
    time: float | None = Field(default_factory=time.time, description="Unix time the decision was made.")
