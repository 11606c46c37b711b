"""The live view's status line: step i of n, elapsed, the current launch or measurement and its expected length,
box minutes used against the plan. Read from the engine's own callbacks (no state of its own to go stale)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from specdoctor.report import fmt

__all__ = ["RunClock"]

# The plan step's one line (engine.actions.plan): "up to 26 launches ≈ 165 min of box time; ..."
_PLAN = re.compile(r"up to (\d+) launch(?:es)? ≈ (\d+(?:\.\d+)?) min of box time")
_LAUNCH = re.compile(r"^launching (\S+)")


@dataclass
class RunClock:
    """What the status line needs, fed by the view's callbacks; `line(now)` renders it."""

    started: float | None = None
    total_steps: int = 0
    step_index: int = 0
    step_title: str = ""
    plan_launches: int | None = None
    plan_minutes: float | None = None
    launches: int = 0
    box_since: float | None = None   # the user's server stopped, or the first launch on a box with none running
    box_until: float | None = None   # the user's server back
    current: str = ""
    current_since: float | None = None

    def step(self, index: int, title: str) -> None:
        self.step_index, self.step_title = index, title
        self.current, self.current_since = "", None

    def finished(self, tool: str, status: str, summary: str, now: float) -> None:
        plan = _PLAN.search(summary or "")
        if plan:
            self.plan_launches, self.plan_minutes = int(plan.group(1)), float(plan.group(2))
        if tool == "take_gpus" and status == "ok" and self.box_since is None:
            self.box_since = now
        if tool == "give_back" and self.box_since is not None:
            self.box_until = now

    def progress(self, message: str, now: float) -> None:
        if _LAUNCH.match(message):
            self.launches += 1
            if self.box_since is None:
                self.box_since = now
            self.current, self.current_since = message, now

    def _expected(self) -> str:
        if self.plan_launches and self.plan_minutes is not None and self.current:
            return f" (a launch ≈ {self.plan_minutes / self.plan_launches:.1f} min by the plan)"
        return ""

    def line(self, now: float) -> str:
        parts = []
        if self.total_steps:
            parts.append(f"step {self.step_index} of {self.total_steps}")
        if self.started is not None:
            parts.append(f"{fmt.seconds(now - self.started)} elapsed")
        if self.plan_launches is not None:
            parts.append(f"launches {self.launches} of ≤ {self.plan_launches} planned")
        if self.box_since is not None:
            used = ((self.box_until or now) - self.box_since) / 60
            of = f" of ≈ {self.plan_minutes:.0f} planned" if self.plan_minutes is not None else ""
            parts.append(f"box {used:.1f} min{of}")
        head = " · ".join(parts)
        if self.current and self.current_since is not None:
            head += f"\nnow: {self.current}, {fmt.seconds(now - self.current_since)}{self._expected()}"
        return head
