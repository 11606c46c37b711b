"""The Host seam: one small protocol (run/read/put/forward/close) that every host implements."""

from __future__ import annotations

import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from specdoctor.errors import CommandFailed, UsageError
from specdoctor.host.audit import AuditLog

__all__ = ["Result", "Check", "Host", "HostHints", "quote_command", "Raw"]

Check = Literal["raise", "warn", "ignore"]


class Raw(str):
    """A command string that is meant for `sh -c` as written (built only from quoted pieces)."""


class Result(BaseModel):
    """What a command did; failures are data (`ok`), `CommandFailed` only under check='raise'."""

    command: list[str] | str = Field(description="argv, or a shell script run with sh -c.")
    stdout: str = ""
    stderr: str = ""
    exit: int = 0
    seconds: float = 0.0
    host: str = ""
    warned: bool = Field(default=False, description="Non-zero exit under check='warn'.")

    @property
    def ok(self) -> bool:
        return self.exit == 0

    @property
    def display(self) -> str:
        return quote_command(self.command)


class HostHints(BaseModel):
    """What a host can tell the CLI about itself (a simulated host knows its scenario's inputs).

    These are *user inputs* (repo, python, launch line, claims), never ground truth.
    """

    repo: str | None = None
    python: str | None = None
    launch: str | None = None
    expect: dict[str, float] = Field(default_factory=dict)
    patch_script: str | None = None
    essential: list[str] = Field(default_factory=list)
    good_fingerprint: str | None = Field(default=None, description="Path on the host of a saved earlier fingerprint.")
    description: str | None = None


def quote_command(cmd: Sequence[str] | str) -> str:
    """The command as one shell-safe string (argv quoted; a Raw/str script shown as sh -c)."""
    if isinstance(cmd, str):
        return cmd
    return shlex.join(cmd)


def _check_argv(cmd: Sequence[str] | str) -> None:
    parts = [cmd] if isinstance(cmd, str) else list(cmd)
    if not parts:
        raise UsageError("empty command")
    for p in parts:
        if not isinstance(p, str):
            raise UsageError(f"command arguments must be strings, got {type(p).__name__}")
        if "\x00" in p:
            raise UsageError("command arguments cannot contain NUL bytes")


class Host(ABC):
    """A machine specdoctor runs commands on. Subclasses implement `_exec`, `read`, `put`, `_forward`, `close`.

    `run` adds what every host shares: argument checks, timing, the audit log and the check policy.
    `base_env` is applied to every command (a login environment the user would have).
    """

    name: str = "host"
    hints: HostHints | None = None
    audit: AuditLog
    base_env: dict[str, str]
    reopen_spec: str | None = None
    """A spec that reopens this same host in a later process (`resume`); None: the spec it was opened with."""

    def __init__(self, *, audit: AuditLog | None = None, base_env: Mapping[str, str] | None = None):
        self.audit = audit if audit is not None else AuditLog()
        self.base_env: dict[str, str] = dict(base_env or {})
        self._home: str | None = None

    # -- the one shared entry point -------------------------------------------------------------
    def run(
        self,
        cmd: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float | None = None,
        check: Check = "raise",
        stdin: bytes | None = None,
    ) -> Result:
        """Run argv (quoted for you) or a shell script (`str`, run by `sh -c`) and return its Result."""
        _check_argv(cmd)
        if env:
            for k, v in env.items():
                if "\x00" in k or "\x00" in v or "=" in k or not k:
                    raise UsageError(f"invalid environment variable name or value: {k!r}")
        command: list[str] | str = cmd if isinstance(cmd, str) else list(cmd)
        started = time.time()
        t0 = time.perf_counter()
        note = None
        try:
            code, out, err = self._exec(command, env=dict(env or {}), cwd=cwd, timeout=timeout, stdin=stdin)
        except Exception as exc:  # recorded, then re-raised: the audit log shows what was attempted
            note = type(exc).__name__
            self.audit.record(host=self.name, command=quote_command(command), cwd=cwd, env=dict(env or {}),
                              exit=None, seconds=time.perf_counter() - t0, note=note, started=started)
            raise
        seconds = time.perf_counter() - t0
        self.audit.record(host=self.name, command=quote_command(command), cwd=cwd, env=dict(env or {}),
                          exit=code, seconds=seconds, stdout=out, stderr=err, started=started)
        result = Result(command=command, stdout=out, stderr=err, exit=code, seconds=seconds, host=self.name)
        if code != 0:
            if check == "raise":
                raise CommandFailed(result)
            if check == "warn":
                result.warned = True
        return result

    @abstractmethod
    def _exec(
        self, cmd: list[str] | str, *, env: dict[str, str], cwd: str | None, timeout: float | None, stdin: bytes | None
    ) -> tuple[int, str, str]:
        """Run and return (exit, stdout, stderr); raise CommandTimedOut / ConnectionLost."""

    @abstractmethod
    def read(self, path: str) -> bytes:
        """The bytes of a file on the host."""

    @abstractmethod
    def put(self, data: bytes | Path, remote_path: str, *, mode: int | None = None) -> None:
        """Write bytes (or a local file's bytes) to a path on the host, creating parent folders."""

    @contextmanager
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Iterator[int]:
        """Yield a local port that reaches `remote_host:remote_port` as seen from the host."""
        with self._forward(remote_port, remote_host) as port:
            yield port

    @abstractmethod
    def _forward(self, remote_port: int, remote_host: str):  # pragma: no cover - abstract
        ...

    @abstractmethod
    def close(self) -> None:
        """Release connections and anything the host started."""

    def detach(self) -> None:
        """Keep what a later `resume` reattaches to (e.g. a simulated host's sandbox) instead of tearing it
        down on close. Real hosts have nothing to keep: a no-op."""
        return None

    def exists(self, path: str) -> bool:
        """Whether a path exists on the host."""
        return self.run(["test", "-e", path], check="ignore").ok

    def home(self) -> str:
        """The host user's home folder (cached)."""
        if self._home is None:
            self._home = self.run(Raw('printf %s "$HOME"')).stdout.strip() or "/tmp"
        return self._home

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
