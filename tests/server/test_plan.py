"""Plan and cost, read-only: the launch time of a real process from its own SGLang-style log, and the plan."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from specdoctor.parsers.sglang_startup import parse_startup
from specdoctor.toolkit import registry
from specdoctor.tools.serving.plan import LaunchCost, PlanInput, PlannedPhase, make_plan

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "sglang-logs"

# A stand-in that starts the way SGLang does: its log lines carry its own clock; loading takes ~1.2 s.
_SERVER = textwrap.dedent("""
    import sys, time
    def log(msg, tag=" TP0"):
        sys.stderr.write(time.strftime("[%Y-%m-%d %H:%M:%S") + tag + "] " + msg + "\\n"); sys.stderr.flush()
    log("server_args=ServerArgs(model_path='/m', tp_size=1)", "")
    log("Load weight begin. avail mem=78.81 GB")
    time.sleep(1.2)
    log("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=66.17 GB, mem usage=12.64 GB.")
    log("Capture cuda graph end. Time elapsed: 0.40 s. mem usage=1.21 GB. avail mem=20.00 GB.")
    log("The server is fired up and ready to roll!", "")
    for _ in range(3):
        log("Decode batch, #running-req: 1, #token: 90, token usage: 0.00, cuda graph: True, "
            "gen throughput (token/s): 80.00, #queue-req: 0,")
    time.sleep(60)
""")


def test_startup_lines_of_real_sglang_logs():
    t = parse_startup((SAMPLES / "v0.4.2-2025-01-ci-eagle-llama2-torchcompile-startup-decode.txt").read_text())
    assert t.models_loaded == ["LlamaForCausalLM", "LlamaForCausalLMEagle"]  # target, then the EAGLE draft
    assert t.loads_s == [6.0, 1.0] and t.load_weight_s == 7.0
    assert t.cuda_graph_s == pytest.approx(15.63 + 3.08) and t.ready_at is not None
    t = parse_startup((SAMPLES / "v0.5.5-2025-11-tp2-capture-cuda-graph-end-piecewise.txt").read_text())
    assert t.cuda_graph_s == pytest.approx(11.39)  # ranks capture in parallel: the slowest, not the sum
    assert parse_startup("[04:40:55 TP0] Load weight end. type=X\n").load_end_at is None  # no date: not placed


def test_a_later_startup_in_the_same_log_wins():
    first = ("[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=70 GB\n"
             "[2025-01-01 10:00:30 TP0] Load weight end. type=A, avail mem=50 GB\n"
             "[2025-01-01 10:01:00] The server is fired up and ready to roll!\n")
    second = ("[2025-01-01 11:00:00 TP0] Load weight begin. avail mem=70 GB\n"
              "[2025-01-01 11:00:10 TP0] Load weight end. type=B, avail mem=50 GB\n"
              "[2025-01-01 11:01:00] The server is fired up and ready to roll!\n")
    t = parse_startup(first + "[2025-01-01 10:30:00] Decode batch, #running-req: 1\n" + second)
    assert t.models_loaded == ["B"] and t.loads_s == [10.0] and t.ready_at is not None and t.ready_at.hour == 11


def test_launch_cost_times_a_real_process_from_its_log(local_ctx, tmp_path):
    log = tmp_path / "server.log"
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", _SERVER], stderr=fh, stdout=fh)
    try:
        deadline = time.time() + 20
        while "Decode batch" not in log.read_text() and time.time() < deadline:
            time.sleep(0.1)
        res = registry.call(local_ctx, "launch_cost", {"pid": proc.pid, "log_path": str(log)})
        assert res.ok, res.summary
        cost = LaunchCost.model_validate(res.output)
        assert cost.source == "process start to the log's ready line"
        assert cost.load_weight_s is not None and 1.0 <= cost.load_weight_s <= 2.0 and cost.cuda_graph_s == 0.4
        # second-resolution log stamps against a tick-resolution start: 1.2 s of loading is 1..4 s here
        assert cost.launch_s is not None and 1.0 <= cost.launch_s <= 4.0
        assert cost.decode_tok_s == 80.0 and "one launch ≈" in res.summary
        commands = [e.command for e in res.evidence]
        # the one process-table scan (the run's engine found from the server's launch line) is a read of /proc too
        scans = [c for c in commands if c.startswith("for d in /proc/[0-9]*;")]
        assert len(scans) <= 1 and all(">" not in c.replace("2>/dev/null", "") for c in scans)
        programs = {part.split()[0] for c in commands if c not in scans for part in c.split(";") if part.strip()}
        assert programs == {"grep", "getconf", "cat", "date", "head", "tail"}  # reads only
        gone = registry.call(local_ctx, "launch_cost", {"pid": proc.pid, "log_path": str(tmp_path / "none.log")})
        assert gone.ok and LaunchCost.model_validate(gone.output).launch_s is None  # no log: unknown, not guessed
    finally:
        proc.kill()
        proc.wait()


def test_plan_counts_launches_and_box_time_and_says_where_the_user_server_is():
    cost = LaunchCost(pid=1, launch_s=120.0, decode_tok_s=64.0, source="test")
    phases = [PlannedPhase(step="reproduce", launches=2, runs=6), PlannedPhase(step="restart", launches=1, runs=4)]
    plan = make_plan(cost, PlanInput(pid=1, port=30000, phases=phases, requests_per_run=2, max_new_tokens=128))
    run_s = 2 * 128 / 64.0
    assert plan.launches_max == 3 and plan.run_s == run_s
    expected_min = (3 * (120.0 + 10.0) + (2 * 6 + 4) * run_s) / 60
    assert plan.box_minutes_max is not None and expected_min <= plan.box_minutes_max < expected_min + 0.1
    # no phase says what it expects: each counts at its cap, so the expectation is the worst case
    assert plan.text.startswith("expected 3 launches ≈ 8 box minutes (worst case 3 ≈ 8)")
    assert "your server on :30000 will be down" in plan.text
    fewer = make_plan(cost, PlanInput(pid=1, port=30000, phases=[phases[0].model_copy(update={"expected": 1}),
                                                                 phases[1]]))
    assert fewer.launches_expected == 2 and fewer.launches_max == 3
    assert fewer.box_minutes_expected is not None and fewer.box_minutes_max is not None
    assert fewer.box_minutes_expected < fewer.box_minutes_max
    assert fewer.text.startswith("expected 2 launches ≈ ") and "(worst case 3 ≈ 8)" in fewer.text
    none = make_plan(cost, PlanInput(pid=1, port=30000, phases=[]))
    assert none.launches_max == 0 and none.text == "no launch: your server on :30000 keeps running"
    beside = make_plan(cost, PlanInput(pid=1, port=30000, phases=phases, stops_user_server=False))
    assert "beside your server on :30000" in beside.text
    unknown = make_plan(LaunchCost(pid=1, source="no log"), PlanInput(pid=1, port=30000, phases=phases))
    assert unknown.box_minutes_max is None and "box time unknown" in unknown.text


def test_plan_tools_are_read_only():
    assert registry.get("launch_cost").effect == "read" and registry.get("plan_launches").effect == "read"


def test_regression_phases_plan_only_what_can_run():
    from specdoctor.engine.actions.plan import regression_phases

    common = dict(essential_given=False, runs=5, max_runs=15, finalists=3)
    clean = regression_phases(changed=0, spec_running=True, tp_size=1, stops_user_server=False, **common)
    assert [p.step for p in clean] == ["reproduce", "attribute"] and clean[0].launches == 1  # running server reused
    assert "list_deltas" in clean[1].condition  # the revert trials depend on differences found later
    assert clean[1].launches == 2 + 2  # control + all reverted, then the first confirmed cause's phase profile
    full = regression_phases(changed=8, spec_running=False, tp_size=8, stops_user_server=True, **common)
    steps = {p.step: p for p in full}
    assert list(steps) == ["reproduce", "essentials", "subtract", "bisect", "nccl_promote", "attribute",
                           "restart"]
    assert steps["reproduce"].launches == 2 and steps["subtract"].launches == 3 and steps["bisect"].launches == 9 + 2  # + the confirmed culprits' phase profile
    assert steps["essentials"].launches == 2 + 8 * (2 + 3) and steps["restart"].launches == 1
    given = regression_phases(changed=8, spec_running=True, tp_size=1, stops_user_server=False,
                              **{**common, "essential_given": True})
    assert "essentials" not in {p.step for p in given} and "nccl_promote" not in {p.step for p in given}


def test_identical_reference_spares_the_code_steps_and_settled_claims_spare_every_launch():
    from specdoctor.engine.actions.plan import bisect_expected, regression_phases
    from specdoctor.models.identity import IdentityFact

    common = dict(essential_given=False, runs=5, max_runs=15, finalists=3, spec_running=True, tp_size=2)
    differs = IdentityFact(code="differs", launch="identical", env="identical")
    steps = {p.step: p for p in regression_phases(changed=8, stops_user_server=True, identity=differs, **common)}
    assert {"essentials", "subtract", "bisect"} <= set(steps)
    assert steps["attribute"].expected == 0  # same flags, same env: only a patch the bisection left could be reverted
    assert steps["bisect"].expected == bisect_expected(8) == 2 * 3  # its phase profile: from its trials (#46)
    same = IdentityFact(code="identical", launch="identical", env="identical")
    steps = {p.step: p for p in regression_phases(changed=8, stops_user_server=True, identity=same, **common)}
    assert list(steps) == ["reproduce", "nccl_promote", "restart"]
    # one byte different (any digest that is not equal) and nothing is spared
    unknown = {p.step for p in regression_phases(changed=8, stops_user_server=True,
                                                 identity=IdentityFact(code="unknown"), **common)}
    assert {"essentials", "subtract", "bisect", "attribute"} <= unknown
    flag = IdentityFact(code="differs", launch="differs", env="identical")
    steps = {p.step: p for p in regression_phases(changed=8, stops_user_server=True, identity=flag, **common)}
    assert steps["bisect"].expected == 0 and steps["attribute"].expected == 2  # the flag is the suspect (its phase: from those 2 trials)
    assert regression_phases(changed=8, stops_user_server=True, identity=IdentityFact(claims_hold_running=True),
                             **common) == []


def test_claims_held_on_the_running_server_expect_no_explaining_trial_but_keep_their_caps():
    from specdoctor.engine.actions.plan import regression_phases

    common = dict(essential_given=False, runs=5, max_runs=15, finalists=3, spec_running=True, tp_size=2,
                  changed=8, stops_user_server=True)
    held = {p.step: p for p in regression_phases(gap_shown=False, **common)}
    assert held["reproduce"].expected is None and held["restart"].expected is None  # the baseline launch, the restart
    assert all(held[s].expected == 0 and held[s].launches > 0 for s in ("essentials", "subtract", "bisect"))
    shown = {p.step: p for p in regression_phases(gap_shown=True, **common)}
    assert shown["essentials"].expected == 1 and shown["bisect"].expected == 2 * 3  # its phase: from its trials
