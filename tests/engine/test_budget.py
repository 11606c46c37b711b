"""--budget: a launching step that would overrun the box minutes is held back; putting the server back never is."""

from __future__ import annotations

from types import SimpleNamespace

from specdoctor.engine.budget import budget_blocker, continue_command
from specdoctor.engine.state import StateView
from specdoctor.models.identity import BudgetFact
from specdoctor.tools.serving.plan import LaunchCost, PlanInput, PlannedPhase, make_plan

T0 = 1_000_000.0


def _view(minutes: float, **budget) -> StateView:
    phases = [PlannedPhase(step="reproduce", launches=1, expected=1, runs=0),
              PlannedPhase(step="bisect", launches=11, expected=8, runs=0),
              PlannedPhase(step="restart", launches=1, runs=0)]
    plan = make_plan(LaunchCost(pid=1, launch_s=290.0, source="test"), PlanInput(pid=1, port=30000, phases=phases))
    fact = BudgetFact(minutes=minutes, started_at=T0, host="root@gpu-box", **budget)
    return StateView({"params": {"repo": "/root/sglang", "expect": {"spec": 94.0}}, "results": {}, "decisions": [],
                      "facts": {"plan": plan.model_dump(mode="json"), "budget": fact.model_dump(mode="json")}})


def _step(sid: str, action: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(id=sid, action=action or sid, tool=None)


def test_a_step_runs_while_it_and_the_restart_fit_and_is_held_back_when_they_do_not():
    view = _view(30.0)  # one launch here: 290 s + 10 s stop = 5 box minutes
    assert budget_blocker(_step("reproduce"), "disrupt", view, now=T0 + 60) is None       # 1 + 5 + 5 <= 30
    held = budget_blocker(_step("bisect", "bisect_patches"), "disrupt", view, now=T0 + 60)  # 1 + 40 + 5 > 30
    assert held is not None and "bisect expects 40.0 more" in held and "30 box minutes" in held
    assert budget_blocker(_step("bisect", "bisect_patches"), "disrupt", _view(60.0), now=T0 + 60) is None
    # time already spent counts: the same bisection no longer fits after 20 minutes
    assert budget_blocker(_step("bisect", "bisect_patches"), "disrupt", _view(60.0), now=T0 + 20 * 60) is not None


def test_putting_the_server_back_and_reads_are_never_held_and_later_steps_follow_the_first_hold():
    view = _view(1.0)
    assert budget_blocker(_step("give_back", "give_back_gpus"), "disrupt", view, now=T0 + 600) is None
    assert budget_blocker(_step("catalog"), "read", view, now=T0 + 600) is None
    stopped = _view(100.0, stopped_before="bisect")
    assert "before bisect" in (budget_blocker(_step("attribute"), "disrupt", stopped, now=T0) or "")


def test_no_budget_no_hold_and_the_command_to_continue_asks_for_enough():
    plain = StateView({"params": {}, "results": {}, "decisions": [], "facts": {}})
    assert budget_blocker(_step("bisect", "bisect_patches"), "disrupt", plain) is None
    view = _view(30.0)
    fact = view.fact("budget", BudgetFact)
    assert fact is not None
    cmd = continue_command(view, fact)
    assert cmd.startswith("specdoctor investigate --host root@gpu-box --repo /root/sglang --expect spec=94 ")
    assert cmd.endswith("--budget 65")  # the plan's worst case: 13 launches x 5 minutes
