"""The report's plan: the plan in force when the user was asked to consent to the stop, with every estimate."""

from __future__ import annotations

from specdoctor.engine.state import StateView
from specdoctor.report import model as m
from specdoctor.tools.serving.plan import Plan

__all__ = ["launch_plan"]


def _phases(plan: Plan) -> list[m.PlannedLaunches]:
    return [m.PlannedLaunches(step=p.step, launches=p.launches, expected=p.expected, condition=p.condition)
            for p in plan.phases]


def launch_plan(view: StateView) -> m.LaunchPlan | None:
    """The plan in force at the stop (the consent re-estimate, else the first plan), every estimate beside it."""
    first = view.fact("plan_first", Plan) or view.result("plan", Plan)
    if first is None:
        return None
    consent = view.fact("plan", Plan) if view.run_facts.plan_first else None
    revised = view.fact("plan_revised", Plan)
    force = consent or first
    estimates = [m.PlanEstimate(stage=stage, launches_expected=p.launches_expected, launches_max=p.launches_max,
                                box_minutes_expected=p.box_minutes_expected, phases=_phases(p))
                 for stage, p in (("first", first), ("consent", consent), ("revised", revised)) if p is not None]
    return m.LaunchPlan(text=force.text, launches_max=force.launches_max, box_minutes_max=force.box_minutes_max,
                        launches_expected=force.launches_expected, box_minutes_expected=force.box_minutes_expected,
                        launch_s=force.launch_s, stops_user_server=force.stops_user_server, phases=_phases(force),
                        stage="consent" if consent is not None else "first", estimates=estimates)
