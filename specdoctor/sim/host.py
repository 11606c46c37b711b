"""SimHost: a LocalHost whose commands run inside a scenario's sandbox (clean login env, sandbox HOME)."""

from __future__ import annotations

from pathlib import Path

from specdoctor.host.audit import AuditLog
from specdoctor.host.local import LocalHost
from specdoctor.sim.sandbox import Sandbox, build_sandbox
from specdoctor.sim.scenario import load_scenario

__all__ = ["SimHost", "open_sim_host"]


class SimHost(LocalHost):
    """The simulated GPU host: same commands as a real box; `close()` stops every sandbox process by PID."""

    def __init__(self, sandbox: Sandbox, *, audit: AuditLog | None = None):
        super().__init__(name=f"sim:{sandbox.scenario.name}", audit=audit, base_env=sandbox.base_env,
                         inherit_env=False)
        self.sandbox = sandbox
        self.hints = sandbox.hints
        self.reopen_spec = f"sim:attach={sandbox.root}"
        self._closed = False

    def detach(self) -> None:
        """Leave the sandbox and its running server in place for `specdoctor resume` (sim:attach=ROOT)."""
        self._closed = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.sandbox.remove()


def open_sim_host(target: str, *, audit: AuditLog | None = None, root: Path | None = None) -> SimHost:
    """`sim:NAME` / `sim:path.yaml`: lay the scenario out (starting its running server) and return its host.

    `sim:attach=ROOT` reattaches to a sandbox laid out earlier (what `specdoctor resume` uses).
    """
    if target.startswith("attach="):
        return SimHost(Sandbox.attach(Path(target[len("attach="):])), audit=audit)
    return SimHost(build_sandbox(load_scenario(target), root), audit=audit)
