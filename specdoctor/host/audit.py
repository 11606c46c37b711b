"""The audit log: every command run on any host, as JSON lines, secrets redacted."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

from specdoctor.host.redact import redact_env, redact_text

__all__ = ["AuditEntry", "AuditLog"]

_TAIL = 2000


class AuditEntry(BaseModel):
    """One command as it ran: enough to re-run it by hand and to cite it as evidence."""

    time: float = Field(description="Unix time the command started.")
    host: str
    command: str = Field(description="The command as a shell would see it (quoted), secrets redacted.")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Extra env passed, secret values redacted.")
    exit: int | None = None
    seconds: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    note: str | None = Field(default=None, description="e.g. 'timeout', 'connection lost', 'dry-run'.")


class AuditLog:
    """Append-only, thread-safe; kept in memory for evidence and optionally mirrored to a file."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else None
        self.entries: list[AuditEntry] = []
        self._lock = threading.Lock()

    def record(
        self,
        *,
        host: str,
        command: str,
        cwd: str | None,
        env: dict[str, str] | None,
        exit: int | None,
        seconds: float,
        stdout: str = "",
        stderr: str = "",
        note: str | None = None,
        started: float | None = None,
    ) -> AuditEntry:
        entry = AuditEntry(
            time=started if started is not None else time.time(),
            host=host,
            command=redact_text(command),
            cwd=cwd,
            env=redact_env(env or {}),
            exit=exit,
            seconds=round(seconds, 4),
            stdout_tail=redact_text(stdout[-_TAIL:]),
            stderr_tail=redact_text(stderr[-_TAIL:]),
            note=note,
        )
        with self._lock:
            self.entries.append(entry)
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry.model_dump(), ensure_ascii=False) + "\n")
        return entry

    def mark(self) -> int:
        """A position to slice from later (`since(mark)`): the evidence of one tool call."""
        with self._lock:
            return len(self.entries)

    def since(self, mark: int) -> list[AuditEntry]:
        with self._lock:
            return list(self.entries[mark:])

    def attach(self, path: Path | str) -> None:
        """Start mirroring to a file, writing what was recorded so far."""
        with self._lock:
            self.path = Path(path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                for e in self.entries:
                    fh.write(json.dumps(e.model_dump(), ensure_ascii=False) + "\n")
