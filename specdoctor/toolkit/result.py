"""ToolResult: every tool call's outcome as data, with the exact commands as evidence."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

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
    _typed: tuple[Any, BaseModel] | None = PrivateAttr(default=None)
    """(`output`, the tool's output model it is the JSON of), kept by the call: `output` is for the record, the
    checkpoint and the wire; the caller gets the tool's object itself (`registry.call_fn`) while `output` is still
    that very object (a copy with another output has none). Later readers get their own copy
    (`registry.typed_output`)."""

    def typed_value(self) -> BaseModel | None:
        """The output model this result's `output` is the JSON of, when known (None: not read yet)."""
        return self._typed[1] if self._typed is not None and self._typed[0] is self.output else None

    def keep_typed(self, value: BaseModel) -> None:
        """Remember `value` as the model `output` is the JSON of."""
        self._typed = (self.output, value)

    @property
    def ok(self) -> bool:
        return self.status == "ok"
