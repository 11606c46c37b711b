"""ToolResult: every tool call's outcome as data, with the exact commands as evidence."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from specdoctor.host.audit import AuditEntry

__all__ = ["ToolResult", "ToolStatus"]

ToolStatus = Literal["ok", "error", "no_data", "needs_approval", "unresolved"]


class ToolResult(BaseModel):
    """The outcome of one tool call. `output` is the tool's output model dumped to JSON-able data."""

    tool: str
    status: ToolStatus
    summary: str = Field(description="One line for the live view and the decisions log.")
    output: dict[str, Any] | None = None
    error: str | None = None
    retryable: bool = False
    evidence: list[AuditEntry] = Field(default_factory=list, description="Commands the call ran, in order.")
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"
