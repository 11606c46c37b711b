"""Left as found, judged like every other measurement, on the twin: a restarted server that warms up reads SAME;
a box that really got slower after the restart still reads NOT (the must-not-fire)."""

from __future__ import annotations

import pytest

from specdoctor.engine.actions.user_server import Pending, bring_back, pending_path
from specdoctor.engine.runs import Relaunch, save_relaunch, write_private
from specdoctor.sim import SimHost, build_sandbox, load_scenario
from specdoctor.sim.sandbox import Sandbox
from specdoctor.sim.scenario import LaterLaunches, Warmup
from specdoctor.toolkit import ToolContext, registry
from specdoctor.tools.serving.user_server import capture

RUNS = 8


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDOCTOR_HOME", str(tmp_path / "sdhome"))


def _box(later: LaterLaunches | None = None) -> Sandbox:
    """no-regression whose fresh servers run their first 30 requests 1.6x slower (longer than one benchmark
    batch, as the real 0.5.17 server after a restart: 442 -> 292 tok/s)."""
    sc = load_scenario("no-regression")
    perf = sc.perf.model_copy(update={"warmup": Warmup(requests=30, factor=1.6),
                                      **({"later_launches": later} if later else {})})
    return build_sandbox(sc.model_copy(update={"perf": perf}))


def _stop_then_bring_back(box: Sandbox, run_id: str):
    ctx = ToolContext(host=SimHost(box), run_id=run_id, auto_approve=True)
    found = registry.call(ctx, "find_server_processes", {"port": box.port, "exactly_one": True})
    server = found.output["servers"][0]
    pid, workers = int(server["main"]["pid"]), [int(w["pid"]) for w in server["workers"]]
    rec = registry.call(ctx, "inspect_user_server", {"pid": pid, "pids": workers, "port": box.port}).output
    bench = {"port": box.port, "runs": 10, "requests_per_run": 3, "max_new_tokens": 128, "warmup_runs": 1}
    registry.call(ctx, "benchmark", bench)  # the user's own traffic: the server has long warmed up
    before = registry.call(ctx, "benchmark", {**bench, "runs": RUNS}).output["samples"]
    cap = capture(ctx.host, pid)
    save_relaunch(Relaunch(run_id=run_id, argv=cap.argv, env=cap.env, cwd=cap.cwd))
    write_private(pending_path(run_id), Pending(
        run_id=run_id, host=box.scenario.name, port=box.port, identity=rec["identity"], samples_before=before,
        gpu_mib_before=sum(rec["gpu_mib"].values()), runs=RUNS, supervisor=rec["supervisor"]).model_dump_json())
    stopped = registry.call(ctx, "stop_user_server", {"pid": pid, "starttime": rec["starttime"], "pids": workers})
    assert stopped.ok, stopped.summary
    return bring_back(ctx, run_id)


def test_a_restart_that_warms_up_reads_same_after_a_re_measurement():
    box = _box()
    try:
        fact, decisions = _stop_then_bring_back(box, "warm1")
        assert fact is not None and fact.restarted and fact.differs == []
        assert fact.identity_after == fact.identity_before and fact.gpu_mib_after == fact.gpu_mib_before
        assert fact.outcome == "SAME" and fact.left_as_found, (fact.throughput_reason, decisions[0].found)
        assert "re-measured" in fact.throughput_reason and "warming up" in fact.throughput_reason
    finally:
        box.remove()


def test_a_box_that_really_got_slower_after_the_restart_is_still_not_as_found():
    box = _box(LaterLaunches(from_launch=2, factor=1.5))  # launch 1: the user's server; 2: its restart
    try:
        fact, decisions = _stop_then_bring_back(box, "slow1")
        assert fact is not None and fact.restarted and fact.identity_after == fact.identity_before
        assert fact.outcome == "DIFFERENT" and fact.left_as_found is False, fact.throughput_reason
        assert "survives a re-measurement" in fact.throughput_reason
        assert "survives a re-measurement" in decisions[0].found
    finally:
        box.remove()
