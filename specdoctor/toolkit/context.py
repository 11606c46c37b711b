"""ToolContext: what a tool call may use besides its arguments (injected, never in the schema)."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from specdoctor.host.base import Host

__all__ = ["ToolContext", "ApprovalRequest"]


@dataclass
class ApprovalRequest:
    """Shown to a person before a mutating/disruptive call: the tool, its arguments, its effect."""

    tool: str
    effect: str
    arguments: dict[str, Any]
    description: str


@dataclass
class ToolContext:
    """Run dependencies for tools: the host, where to keep run files on it, approval and progress hooks.

    `approve` returns True to let a mutate/disrupt call proceed; None means "nobody to ask", and such calls
    come back with status `needs_approval` unless `auto_approve` is set (`--yes`).
    """

    host: Host
    run_id: str = "adhoc"
    auto_approve: bool = False
    approve: Callable[[ApprovalRequest], bool] | None = None
    progress: Callable[[str], None] | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    def say(self, message: str) -> None:
        """A one-line progress message for the live view (never printed by tools themselves)."""
        if self.progress:
            self.progress(message)

    @property
    def state_dir(self) -> str:
        """specdoctor's folder on the host (backups, logs, shipped scripts)."""
        return f"{self.host.home()}/.specdoctor"

    @property
    def run_dir(self) -> str:
        return f"{self.state_dir}/runs/{self.run_id}"

    def remote_script(self, name: str) -> str:
        """Upload `specdoctor/tools/remote/NAME` to a content-hashed folder on the host once; return its path."""
        key = f"remote:{name}"
        if key in self.cache:
            return self.cache[key]
        data = resources.files("specdoctor.tools.remote").joinpath(name).read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:16]
        path = f"{self.state_dir}/remote/{digest}/{name}"
        if not self.host.run(["test", "-f", path], check="ignore").ok:
            self.host.put(data, path, mode=0o755)
        self.cache[key] = path
        return path

    def sh(self, *argv: str) -> str:
        """Quote argv for a shell script fragment (for pipelines built by specdoctor itself)."""
        return shlex.join(argv)
