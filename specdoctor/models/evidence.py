"""Where a claim comes from: the tool, the step, the commands and the numbers it read."""

from __future__ import annotations

from pydantic import Field

from specdoctor.models.base import StrictModel

__all__ = ["Evidence"]


class Evidence(StrictModel):
    """Where a claim comes from: the tool, the commands (ids index `Report.commands`), the numbers."""

    tool: str | None = None
    step: str | None = Field(default=None, description="Playbook step id that produced it.")
    command_ids: list[int] = Field(default_factory=list, description="Indices into Report.commands.")
    commands: list[str] = Field(default_factory=list, description="Commands quoted literally (when no id).")
    numbers: dict[str, float | int | str] = Field(default_factory=dict, description="Named values read.")
