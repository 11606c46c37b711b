"""The live view's status line: step i of n, elapsed, the current launch and its expected length, box minutes."""

from __future__ import annotations

import io

from rich.console import Console

from specdoctor.report.live import LiveView
from specdoctor.report.live_status import RunClock

PLAN = [("plan", "Plan and cost the launches", "plan_run", ""), ("free_gpus", "Stop your server", "take_gpus", ""),
        ("subtract", "Subtract", "subtract", ""), ("give_back", "Restart your server", "give_back", "")]


def _view(t: list[float], *, tty: bool) -> tuple[LiveView, io.StringIO]:
    buf = io.StringIO()
    return LiveView(console=Console(file=buf, force_terminal=tty, width=160), clock=lambda: t[0]), buf


def test_status_line_counts_steps_launches_and_box_minutes_against_the_plan() -> None:
    t = [0.0]
    view, buf = _view(t, tty=True)
    view.start(PLAN)
    view.step_started("plan")
    t[0] = 2
    view.step_finished("plan", "ok", "up to 26 launches ≈ 165 min of box time; your server on :30000 will be down")
    view.step_started("free_gpus")
    t[0] = 5
    view.step_finished("free_gpus", "ok", "stopped your server")
    view.step_started("subtract")
    t[0] = 65
    view.progress("launching trial-1 on port 31000")
    t[0] = 95
    line = view.clock.line(t[0])
    view.step_finished("subtract", "ok", "SAME")
    view.step_started("give_back")
    t[0] = 125
    view.step_finished("give_back", "ok", "back")
    after = view.clock.line(600)
    view.close()
    assert line.splitlines() == ["step 3 of 4 · 1 min 35 s elapsed · launches 1 of ≤ 26 planned · box 1.5 min of ≈ 165 "
                                 "planned", "now: launching trial-1 on port 31000, 30.00 s (a launch ≈ 6.3 min by "
                                 "the plan)"]
    assert "box 2.0 min of ≈ 165 planned" in after  # the clock stops when your server is back
    assert "step 3 of 4" in buf.getvalue()  # rendered in the live display


def test_no_plan_and_no_launch_say_nothing_about_them() -> None:  # the must-not-fire case
    clock = RunClock(started=0.0, total_steps=3)
    clock.step(1, "Host facts")
    clock.finished("host_facts", "ok", "8 GPUs; launches are up to the user", 1.0)  # no plan line to read
    clock.progress("benchmark run 1/5", 2.0)
    assert clock.line(3.0) == "step 1 of 3 · 3.00 s elapsed"


def test_plain_output_has_no_status_line() -> None:
    t = [0.0]
    view, buf = _view(t, tty=False)
    view.start(PLAN)
    view.step_started("plan")
    view.step_finished("plan", "ok", "up to 26 launches ≈ 165 min of box time")
    view.close()
    assert "elapsed" not in buf.getvalue() and "\x1b[" not in buf.getvalue()
