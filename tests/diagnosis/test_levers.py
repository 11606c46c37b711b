"""What-if levers: verify on a CUDA graph, draft steps, kept apart from what a trial measured; the plan leads with the
biggest lever that is cheap to try (and proposes none where nothing runs eager)."""

from __future__ import annotations

import statistics
from pathlib import Path

from specdoctor.diagnosis import Case, RunFacts, decide_verdict, game_plan
from specdoctor.diagnosis.facts import ToolOutputs
from specdoctor.diagnosis.levers import REAL_VERIFY_OVER_DECODE, graph_lever, levers, steps_lever
from specdoctor.models import AttributionFact, CauseFact, MeasuredFact, MeasureFacts, ServerFact
from specdoctor.parsers.sglang import parse_decode_lines
from specdoctor.parsers.sglang_trace import parse_sglang_trace
from specdoctor.tools.breakeven.breakeven import BreakevenInput, analyze

FIX = Path(__file__).parents[1] / "fixtures"
EAGER = "verify is not replaying a CUDA graph: 48 of 48 speculative Decode batch lines say 'cuda graph: False'"
LAUNCH = ("python -m sglang.launch_server --model-path /m/Kimi --tp-size 8 --speculative-algorithm EAGLE3 "
          "--speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --port 30000")


def _case(*, base: float, spec: float, tau: float, verify: float, draft: float, steps: int, eager: bool,
          decode_graph: bool = True, launch: str = LAUNCH, expect: dict[str, float] | None = None,
          attribution: AttributionFact | None = None) -> Case:
    be = analyze(BreakevenInput(baseline_tps=base, spec_tps=spec, accept_len=tau, verify_ms=verify, draft_ms=draft,
                                steps=steps, overhead_ms=0.02))
    measure = MeasureFacts(baseline=MeasuredFact(median=base, samples=[base] * 5, cuda_graph=decode_graph),
                           spec=MeasuredFact(median=spec, samples=[spec] * 5, accept_length=tau,
                                             cuda_graph=not eager, findings=[EAGER] if eager else []))
    facts = RunFacts(measure=measure, launch=launch, attribution=attribution,
                     server=ServerFact(running=True, port=30000, log_path="/home/u/sglang_server.log"))
    return Case(facts=facts, tools=ToolOutputs(breakeven=be), expect=expect or {})


SEED = dict(base=80.8, spec=58.2, tau=1.77, verify=28.8, draft=0.5, steps=2)


def test_on_the_seed_the_first_action_is_verify_on_a_graph_with_its_range():
    case = _case(**SEED, eager=True)
    plan = game_plan(case, decide_verdict(case))
    first = plan[0]
    assert first.lever == "verify-graph" and first.basis == "modelled" and first.modelled is not None
    m = first.modelled
    # verify at 1.04 × the 12.4 ms graph-replayed decode step: a 13.9 ms cycle, ~1.8× today's tok/s
    assert 55 < m.point < 80 and m.low < m.point < m.high < 80 and m.low > 10
    assert abs(first.gain_tps - m.point) < 0.01 and any("1.04" in a for a in m.assumptions)
    assert "τ* 2.4" in first.detail and "clears it" in first.detail       # beside the acceptance the drafter needs
    assert first.command and "sglang_server.log" in first.command        # where to read why it runs eager
    serve = next(a for a in plan if a.title.startswith("Serve without speculation"))
    assert plan.index(serve) > 0 and serve.basis == "measured"           # measured, but the smaller cheap lever
    drafter = next(a for a in plan if a.title.startswith("Improve the drafter"))
    assert plan.index(drafter) > plan.index(serve)                        # GPU days come after the relaunches
    assert not any(a.title.startswith("Check why verify") for a in plan)  # the model replaces the bare check


def test_must_not_fire_when_verify_replays_a_graph():
    # the claims hold and nothing runs eager (verify on its graph at 13.1 ms): no graph lever, no such action
    case = _case(base=82.0, spec=124.0, tau=1.8, verify=13.1, draft=0.5, steps=2, eager=False,
                 expect={"baseline": 82.0, "spec": 124.0})
    assert graph_lever(case) is None
    plan = game_plan(case, decide_verdict(case))
    assert not any(a.lever in ("verify-graph", "cuda-graph") or "CUDA graph" in a.title for a in plan)


def test_disabled_graphs_use_the_decode_steps_own_measured_ratio_and_drop_the_flag():
    # cuda-graph-disabled-flag's shape: decode and verify eager; the good run's baseline (graphs on) 41.7 against
    # today's eager 30.8 is the decode step's own eager/graph ratio (1.35)
    launch = LAUNCH + " --disable-cuda-graph"
    case = _case(base=30.8, spec=63.8, tau=2.77, verify=39.8, draft=0.9, steps=4, eager=True, decode_graph=False,
                 launch=launch, expect={"baseline": 41.7, "spec": 84.0})
    x = graph_lever(case)
    assert x is not None and x.kind == "cuda-graph"
    assert x.command is not None and "--disable-cuda-graph" not in x.command and "--tp-size 8" in x.command
    assert 0.30 < x.gain_tps / 63.8 < 0.40                              # ≈ the 1.35 ratio on the whole cycle
    assert any("1.35" in a for a in x.assumptions)


def test_a_measured_lever_shows_modelled_beside_measured_on_the_confirmed_fix():
    # steps-cut's shape: k = 1 today (τ 1.75, α 0.75), the good run drafted 3 steps; the revert trial measured +44.6
    cause = CauseFact(name="--speculative-num-steps 3 → 1 (launch line)", kind="launch-flag",
                      key="speculative_num_steps", effect_tps=-44.6, confirmed=True, fix="relaunch with 3 steps")
    att = AttributionFact(reference_tps=153.3, measured_tps=108.7, causes=[cause])
    case = _case(base=70.9, spec=108.7, tau=1.75, verify=15.5, draft=0.55, steps=1, eager=False,
                 attribution=att, expect={"baseline": 71.0, "spec": 152.0})
    case.facts.deltas = None
    x = steps_lever(case, target_steps=3)
    assert x is not None and x.measured_tps == 44.6 and x.gain_low <= x.gain_tps <= x.gain_high
    assert abs(x.gain_tps - 44.6) / 44.6 < 0.15                        # the model against the trial
    plan = game_plan(case, decide_verdict(case))
    fix = plan[0]
    assert fix.confirmed and fix.basis == "measured" and fix.lever == "draft-steps"
    assert fix.measured_gain_tps == 44.6 and fix.modelled is not None and "what-if model" in fix.detail
    assert not any(a.lever == "draft-steps" and not a.confirmed for a in plan)  # one action per lever


def test_a_lever_below_what_the_model_can_tell_is_not_proposed():
    # k = 2 already at the model's best (α 0.5, verify 3× a draft step): no steps action
    case = _case(base=80.0, spec=85.0, tau=1.75, verify=20.0, draft=2.0, steps=2, eager=False)
    assert steps_lever(case) is None and [x.kind for x in levers(case)] == []


def test_the_real_engines_verify_over_decode_ratio_is_its_fixtures():
    """REAL_VERIFY_OVER_DECODE from the real 0.5.17 H200 server: verify's GPU time in the profiler trace over the
    plain decode step (1000 / the no-speculation server's batch-1 gen throughput)."""
    trace = parse_sglang_trace((FIX / "sglang-0.5.17-h200/trace/spec-1796176826.4640355-TP-0.trace.json.gz")
                               .read_bytes())
    verify = statistics.median(trace.samples("verify"))
    lines = parse_decode_lines((FIX / "sglang-0.5.17-h200/nospec/server.log").read_text(errors="replace"))
    tput = statistics.median(x.gen_throughput for x in lines
                             if x.running_req == 1 and x.gen_throughput and x.gen_throughput > 50)
    assert abs(verify / (1000.0 / tput) - REAL_VERIFY_OVER_DECODE) < 0.02
