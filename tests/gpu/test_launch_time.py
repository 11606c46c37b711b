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


def test_the_logged_elapsed_wins_over_the_second_resolution_timestamps():
    from specdoctor.parsers.sglang_startup import parse_startup

    # SGLang 0.5.x lines (elapsed= since 2026; a TP1 line must not count: ranks load in parallel)
    log = ("[2026-02-26 16:31:00 TP0] Load weight begin. avail mem=283.96 GB\n"
           "[2026-02-26 16:41:05 TP1] Load weight end. elapsed=605.50 s, type=KimiK25ForConditionalGeneration, "
           "dtype=torch.bfloat16, avail mem=210.38 GB, mem usage=73.58 GB.\n"
           "[2026-02-26 16:41:06 TP0] Load weight end. elapsed=606.34 s, type=KimiK25ForConditionalGeneration, "
           "dtype=torch.bfloat16, avail mem=209.96 GB, mem usage=73.58 GB.\n"
           "[2026-02-26 16:42:10 TP0] Capture cuda graph end. Time elapsed: 41.20 s. mem usage=1.2 GB. avail mem=9 GB.\n"
           "[2026-02-26 16:42:20 TP0] Capture draft cuda graph end. Time elapsed: 9.80 s. mem usage=0.2 GB. "
           "avail mem=8 GB.\n")
    t = parse_startup(log)
    assert t.load_weight_s == pytest.approx(606.34)  # not 606 (the timestamps' difference)
    assert t.cuda_graph_s == pytest.approx(51.0)
    old = parse_startup(log.replace("elapsed=606.34 s, ", "").replace("elapsed=605.50 s, ", ""))
    assert old.load_weight_s == pytest.approx(606.0)  # older logs: begin → end timestamps
