"""The subtraction reuses today's measurement as "all patches" only when it measured that configuration."""

from __future__ import annotations

from specdoctor.engine.actions.subtract import today_all_patches
from specdoctor.engine.state import StateView

LAUNCH = "python -m sglang.launch_server --model-path /m --tp-size 8 --port 30000"
SPEC = {"label": "spec (running server)", "samples": [58.1, 59.0, 57.7, 58.4], "median": 58.25}


def _view(**facts) -> StateView:
    return StateView({"params": {}, "facts": facts, "results": {}})


def test_the_running_servers_figure_stands_for_all_patches_with_the_same_launch_line():
    got = today_all_patches(_view(measure={"spec": SPEC}, server={"launch": LAUNCH}, launch=LAUNCH))
    # the figure as the typed record holds it: every field it was given (and the model's defaults beside them)
    assert got is not None and {k: getattr(got, k) for k in SPEC} == SPEC


def test_not_reused_when_it_measured_something_else():
    other = LAUNCH.replace("--tp-size 8", "--tp-size 4")
    # --launch names another configuration than the one the running server runs
    assert today_all_patches(_view(measure={"spec": SPEC}, server={"launch": LAUNCH}, launch=other)) is None
    # too few runs, or a failed measurement
    assert today_all_patches(_view(measure={"spec": {**SPEC, "samples": [58.0, 59.0]}}, server={"launch": LAUNCH},
                                   launch=LAUNCH)) is None
    assert today_all_patches(_view(measure={"spec": {**SPEC, "error": "no answer"}}, server={"launch": LAUNCH},
                                   launch=LAUNCH)) is None
    # the claims' workload was measured too: the figure with today's workload is the one that stands
    today = {"spec": {**SPEC, "median": 61.0}}
    alike = {"spec": {**SPEC, "label": "spec (running server, recorded workload)", "median": 70.0}}
    got = today_all_patches(_view(measure=alike, measure_today_workload=today, server={"launch": LAUNCH},
                                  launch=LAUNCH))
    assert got is not None and got.median == 61.0
