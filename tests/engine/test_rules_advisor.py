"""The rules advisor reaches each verdict from the evidence it needs, and only from that."""

from __future__ import annotations

from pydantic import BaseModel

from specdoctor.diagnosis import Case, decide_verdict, game_plan
from specdoctor.engine.state import StateView
from specdoctor.models import BreakevenAnalysis, TargetRequirement
from specdoctor.toolkit import ToolResult
from specdoctor.tools.checkout.bisect import BisectResult, Trial
from specdoctor.tools.environment.gates import Gate, GateScan
from specdoctor.tools.serving.server import EnvRow, Propagation


def _stored(tool: str, output: BaseModel) -> dict:
    """A tool result as the engine checkpoints it (the advisor reads it back through the output model)."""
    return ToolResult(tool=tool, status="ok", summary="", output=output.model_dump(mode="json")).model_dump(mode="json")


def _bisect(verdict: str, culprits: list[str], confirmed: bool) -> dict:
    # the confirming trials: every patch (60 tok/s) and every patch but the culprits (70): the culprits' share
    trials = [Trial(patches=["p1", "p2", *culprits], outcome="regressed", samples=[59.0, 60.0, 61.0]),
              Trial(patches=["p1", "p2"], outcome="same", samples=[69.0, 70.0, 71.0])]
    return _stored("bisect_patches", BisectResult(verdict=verdict, culprits=culprits, confirmed=confirmed,
                                                  launches=4, naive_launches=5, order=["p1", "p2", *culprits],
                                                  trials=trials))


def _state(**facts) -> StateView:
    results = facts.pop("results", {})
    return StateView({"params": {}, "facts": facts, "results": results})


MEASURE = {"baseline": {"median": 82.0, "samples": [81, 82, 83]},
           "spec": {"median": 60.0, "samples": [59, 60, 61], "accept_length": 1.8}}


def test_nothing_measured_is_inconclusive():
    assert decide_verdict(Case.of(_state())).verdict == "inconclusive"


def test_claims_different_and_subtraction_same_is_baseline_not_reproducible():
    v = decide_verdict(Case.of(_state(measure=MEASURE, claims={"baseline": {"claimed": 89, "outcome": "DIFFERENT"},
                                                       "spec": {"claimed": 94, "outcome": "DIFFERENT"}},
                              subtraction={"outcome": "SAME"})))
    assert v.verdict == "baseline-not-reproducible" and not v.culprits and v.confidence >= 0.8


def test_bisection_culprit_makes_code_regression_and_mentions_enabled_gate():
    gates = _stored("scan_feature_gates", GateScan(repo="/r", gates=[Gate(
        name="SGLANG_X", reader="os.environ.get", default="0", file="p3", line="x = os.environ.get('SGLANG_X')",
        state="ENABLED-at-runtime", reason="set in the workers")]))
    bis = _bisect("culprit", ["p3"], True)
    v = decide_verdict(Case.of(_state(measure=MEASURE, subtraction={"outcome": "DIFFERENT"},
                              results={"gates": gates, "bisect": bis})))
    assert v.verdict == "code-regression" and v.culprits == ["p3"]
    assert any("SGLANG_X" in r for r in v.reasons)


def test_dropped_worker_env_is_environment():
    prop = _stored("check_env_propagation", Propagation(port=30000, main_pid=10, shell_source="given", rows=[
        EnvRow(name="NCCL_PROTO", shell="LL", parent="LL", workers={"0": None}, status="dropped-for-workers")]))
    v = decide_verdict(Case.of(_state(measure=MEASURE, claims={"spec": {"claimed": 94, "outcome": "DIFFERENT"}},
                              results={"propagation": prop})))
    assert v.verdict == "environment" and "NCCL_PROTO" in v.sentence


def test_claims_within_noise_is_no_regression():
    v = decide_verdict(Case.of(_state(measure=MEASURE, claims={"baseline": {"claimed": 82, "outcome": "SAME"}})))
    assert v.verdict == "no-regression"


def test_game_plan_measured_fixes_before_the_modelled_drafter():
    be = _stored("breakeven", BreakevenAnalysis(
        decode_ms=12.2, baseline_tps=82.0, cycle_ms=30.0, cycle_source="throughput", tau_star=2.46, accept_len=1.8,
        steps=3, targets=[TargetRequirement(speedup=1.0, steps=3, alpha_needed=0.68, tau_needed=2.46),
                          TargetRequirement(speedup=1.2, steps=3, alpha_needed=0.8, tau_needed=2.95)]))
    view = _state(measure=MEASURE, claims={"spec": {"claimed": 94, "outcome": "DIFFERENT"}},
                  subtraction={"outcome": "SAME"}, results={"breakeven": be})
    plan = game_plan(Case.of(view), decide_verdict(Case.of(view)))
    # serving without speculation is measured (+22 tok/s today); the drafter's +38 is a model: it comes after
    assert plan[0].title.startswith("Serve without speculation") and plan[0].basis == "measured"
    drafter = plan[1]
    assert "drafter" in drafter.title and "α ≥ 0.68" in drafter.title and "α ≥ 0.80" in drafter.title
    assert drafter.basis == "modelled" and drafter.gain_tps and drafter.gain_tps > 30
    assert drafter.expected_gain.startswith("modelled: ") and "GPU days" in drafter.cost
    assert plan[-1].title.startswith("Record an environment fingerprint")
    assert all(a.cost for a in plan)


def test_game_plan_puts_a_confirmed_revert_above_a_bigger_modelled_gain():
    be = _stored("breakeven", BreakevenAnalysis(
        decode_ms=12.2, baseline_tps=82.0, cycle_ms=30.0, cycle_source="throughput", tau_star=2.46, accept_len=1.8,
        steps=3, targets=[TargetRequirement(speedup=1.0, steps=3, alpha_needed=0.68, tau_needed=2.46),
                          TargetRequirement(speedup=1.2, steps=3, alpha_needed=0.8, tau_needed=2.95)]))
    measure = {"baseline": {"median": 65.0, "samples": [65, 65, 65]},
               "spec": {"median": 60.0, "samples": [59, 60, 61], "accept_length": 1.8}}
    sub = {"outcome": "DIFFERENT", "comparison": {"verdict": "better"}, "all_patches": {"median": 60.0},
           "essentials_only": {"median": 70.0}}
    view = _state(measure=measure, subtraction=sub, nccl={"best": "remove NCCL_PROTO", "best_gain_pct": 4.0,
                                                          "env": {}, "unset": ["NCCL_PROTO"]},
                  results={"breakeven": be, "bisect": _bisect("culprit", ["p3"], True)})
    plan = game_plan(Case.of(view), decide_verdict(Case.of(view)))
    titles = [a.title for a in plan]
    assert titles[0].startswith("Revert local patch p3") and plan[0].basis == "measured" and plan[0].gain_tps == 10.0
    assert plan[0].command is not None and "apply -R" in plan[0].command
    nccl = titles.index("Remove NCCL_PROTO from the workers' environment")
    assert plan[nccl].basis == "measured"
    drafter = next(a for a in plan if a.title.startswith("Improve the drafter"))
    assert drafter.gain_tps and drafter.gain_tps > 10 and titles.index(drafter.title) > nccl  # bigger, but modelled
    assert [a.basis for a in plan[:-1]] == sorted((a.basis for a in plan[:-1]),
                                                  key=["measured", "modelled", "none"].index)
    assert all(a.cost for a in plan)


def test_an_unresolved_bisection_names_no_culprit():
    bis = _bisect("unresolved", ["a.py", "b.py"], False)
    v = decide_verdict(Case.of(_state(measure=MEASURE, subtraction={"outcome": "DIFFERENT",
                                                            "comparison": {"verdict": "better"}},
                              results={"bisect": bis})))
    assert v.verdict == "inconclusive" and not v.culprits


def test_confirmed_culprits_stand_without_a_reproduce_step_unconfirmed_ones_are_never_named():
    v = decide_verdict(Case.of(_state(results={"bisect": _bisect("culprit", ["p3"], True)})))
    assert v.verdict == "code-regression" and v.culprits == ["p3"]
    v = decide_verdict(Case.of(_state(results={"bisect": _bisect("culprit", ["p3"], False)})))
    assert v.verdict != "code-regression" and not v.culprits


def test_a_failed_speculative_measurement_is_not_no_regression():
    measure = {"baseline": {"median": 82.0, "samples": [81, 82, 83]}, "spec": {"error": "server did not start"}}
    view = StateView({"params": {"expect": {"baseline": 82, "spec": 94}},
                      "facts": {"measure": measure, "claims": {"baseline": {"claimed": 82, "outcome": "SAME"}}},
                      "results": {}})
    v = decide_verdict(Case.of(view))
    assert v.verdict == "inconclusive" and any("spec" in r for r in v.reasons)
