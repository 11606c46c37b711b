"""Launch time on the twin is in model seconds, set by the scenario, and read back from the log by launch_cost."""

from __future__ import annotations

import pytest

from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.toolkit import ToolContext, registry


def _cost(disk_gb_s: float, weights_gb: float) -> dict:
    sc = load_scenario("no-regression")
    sc = sc.model_copy(update={
        "server": sc.server.model_copy(update={"launch_time": sc.server.launch_time.model_copy(
            update={"disk_gb_s": disk_gb_s, "cuda_graph_s": 40.0, "draft_cuda_graph_s": 10.0})}),
        "gpu_memory": sc.gpu_memory.model_copy(update={"weights_gb": weights_gb, "draft_gb": 2.0})})
    box = build_sandbox(sc)
    try:
        ctx = ToolContext(host=SimHost(box), run_id="cost")
        found = registry.call(ctx, "find_server_processes", {"port": box.port, "exactly_one": True})
        server = found.output["servers"][0]
        res = registry.call(ctx, "launch_cost", {"pid": server["main"]["pid"], "log_path": server["log_path"]})
        assert res.ok, res.summary
        return res.output
    finally:
        box.remove()


def test_a_slow_disk_and_big_weights_cost_model_minutes_read_from_the_log():
    slow = _cost(0.5, 140.0)
    assert slow["load_weight_s"] == pytest.approx(140 / 0.5 + 2 / 0.5)  # target then draft, 'elapsed=' of each
    assert slow["cuda_graph_s"] == pytest.approx(40 + 10)  # target and draft capture
    assert slow["launch_s"] >= 284 + 50  # never less than what the log times itself (the wall clock is short)
    fast = _cost(4.0, 140.0)
    assert fast["load_weight_s"] == pytest.approx(140 / 4 + 2 / 4)
    assert fast["launch_s"] < slow["launch_s"] - 200
