"""How the box was left: the user's server brought back as it was, and the checkout proven unchanged.

The GPU-ownership steps write `UserServerFact` (facts key ``user_server``), the checkout steps write
`CheckoutProofFact` (facts key ``checkout_proof``); the report's "box left as found" line reads both.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specdoctor.models.base import StrictModel

__all__ = ["UserServerFact", "CheckoutProofFact", "BoxLeftFact"]


class UserServerFact(StrictModel):
    """The user's running server: whether specdoctor stopped it, and how it came back."""

    port: int | None = None
    pid_before: int | None = None
    pid_after: int | None = None
    identity_before: str | None = Field(default=None, description="Hash of argv + environment + cwd + user.")
    identity_after: str | None = None
    supervisor: str | None = Field(default=None, description="none / tmux / screen / supervisord / systemd / "
                                   "container / nohup, from /proc/PID/cgroup and the parent chain.")
    stopped: bool = False
    stop_consent: Literal["approved", "yes-flag", "refused", "not-needed"] | None = None
    restarted: bool | None = Field(default=None, description="None: never stopped, so nothing to restart.")
    healthy: bool | None = None
    port_held: bool | None = Field(default=None, description="While it was down, a placeholder kept its port "
                                   "(answering 503 with the reason) so that nothing else took it.")
    tps_before: float | None = None
    tps_after: float | None = None
    outcome: Literal["SAME", "DIFFERENT", "UNKNOWN"] | None = Field(
        default=None, description="Comparator on the short benchmark before stopping vs after restarting.")
    throughput_reason: str = Field(default="", description="Why the throughput reads as it does (a first look "
                                   "re-measured, undecided after how many runs).")
    gpu_mib_before: int | None = Field(default=None, description="GPU memory its processes held, before stopping.")
    gpu_mib_after: int | None = None
    differs: list[str] = Field(default_factory=list, description="What of its identity differs after the restart "
                               "(argv/cwd/env/user hash, port, GPU memory held); empty: the same server.")
    note: str = ""

    @property
    def left_as_found(self) -> bool | None:
        if not self.stopped:
            return True
        if self.restarted is None:
            return None
        return bool(self.restarted and self.healthy and self.identity_before == self.identity_after
                    and not self.differs and (self.outcome == "SAME" or self.faster_after))

    @property
    def faster_after(self) -> bool:
        """Back measurably *faster* than before it was stopped: nothing specdoctor did can have made it so (the
        same argv, environment and checkout); the real H200 box drifted ±25 % between launches of one server."""
        return bool(self.outcome == "DIFFERENT" and self.tps_before and self.tps_after
                    and self.tps_after > self.tps_before)


class CheckoutProofFact(StrictModel):
    """Manifest of the checkout before anything and at the end: identical byte for byte, or what differs."""

    repo: str
    manifest_before: str | None = Field(default=None, description="Hash of the manifest taken first.")
    manifest_after: str | None = None
    identical: bool | None = None
    differences: list[str] = Field(default_factory=list, description="Paths/index entries that differ.")
    lock_holder: str | None = Field(default=None, description="Run id that held the checkout lock.")
    note: str = ""


class BoxLeftFact(StrictModel):
    """The one line the report prints: server back as it was, tree hash verified."""

    server: UserServerFact | None = None
    checkout: CheckoutProofFact | None = None

    @property
    def ok(self) -> bool | None:
        parts = [p for p in ((self.server.left_as_found if self.server else None),
                             (self.checkout.identical if self.checkout else None)) if p is not None]
        return all(parts) if parts else None
