"""specdoctor's exceptions: broken contracts and infrastructure, each with a stable CLI exit code."""

from __future__ import annotations

from typing import ClassVar, Protocol

__all__ = [
    "SpecdoctorError",
    "ResultShapeError",
    "UsageError",
    "HostError",
    "HostUnreachable",
    "HostAuthFailed",
    "HostKeyRejected",
    "ConnectionLost",
    "CommandFailed",
    "CommandTimedOut",
    "RepoRefused",
    "BackupError",
    "ScenarioError",
    "ToolRetry",
    "ToolFailed",
    "NoData",
    "Unresolved",
]


class SpecdoctorError(Exception):
    """Base class; `str(err)` is the one-line message the CLI prints."""

    exit_code: ClassVar[int] = 1
    code: ClassVar[str] = "error"


class ResultShapeError(SpecdoctorError):
    """A tool result or a recorded fact does not have the shape its reader expects (a broken contract, not a domain
    outcome)."""

    code = "result-shape"


class UsageError(SpecdoctorError):
    """The caller (user or developer) passed something invalid."""

    exit_code = 2
    code = "usage"


class HostError(SpecdoctorError):
    """Something went wrong talking to a host."""

    exit_code = 10
    code = "host"


class HostUnreachable(HostError):
    """TCP connection or DNS lookup failed."""

    exit_code = 11
    code = "host-unreachable"


class HostAuthFailed(HostError):
    """SSH authentication failed; the message names what was tried."""

    exit_code = 12
    code = "host-auth"


class HostKeyRejected(HostError):
    """The host key is unknown (and not accepted) or changed."""

    exit_code = 13
    code = "host-key"


class ConnectionLost(HostError):
    """An established connection dropped mid-command."""

    exit_code = 14
    code = "connection-lost"


class CommandOutcome(Protocol):
    """What a failed command's error needs of its result (`specdoctor.host.base.Result` is one): errors stay at the
    bottom of the imports, knowing no host."""

    @property
    def host(self) -> str: ...
    @property
    def exit(self) -> int | None: ...
    @property
    def display(self) -> str: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...


class CommandFailed(HostError):
    """A command exited non-zero under check='raise'; carries its Result as evidence."""

    exit_code = 15
    code = "command-failed"

    def __init__(self, result: CommandOutcome):
        self.result = result
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
        super().__init__(f"command failed on {result.host} (exit {result.exit}): {result.display} :: {tail[0][:200]}")


class CommandTimedOut(HostError):
    """A command ran past its timeout."""

    exit_code = 16
    code = "command-timeout"

    def __init__(self, host: str, display: str, timeout: float):
        self.timeout = timeout
        super().__init__(f"command timed out on {host} after {timeout:g}s: {display}")


class RepoRefused(SpecdoctorError):
    """The repository is in a state where specdoctor refuses to mutate it."""

    exit_code = 20
    code = "repo-refused"


class BackupError(SpecdoctorError):
    """A backup could not be written or a restore could not be verified."""

    exit_code = 21
    code = "backup"


class ScenarioError(SpecdoctorError):
    """A simulated-host scenario is missing or invalid."""

    exit_code = 30
    code = "scenario"


class ToolRetry(SpecdoctorError):
    """A tool call failed in a way the caller can fix (different arguments, run again)."""

    code = "tool-retry"


class ToolFailed(SpecdoctorError):
    """A tool call failed for good."""

    code = "tool-failed"


class NoData(SpecdoctorError):
    """A tool found nothing to report (e.g. no server running); not an error."""

    code = "no-data"


class Unresolved(SpecdoctorError):
    """A trial could not be judged (patch conflict, failed start); carries an optional output."""

    code = "unresolved"

    def __init__(self, message: str, output: object | None = None):
        self.output = output
        super().__init__(message)
