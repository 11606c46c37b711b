"""The verdict follows the measured attribution: each branch, its sentence, and the rules that must not fire."""

from __future__ import annotations

from pydantic import BaseModel

from specdoctor.diagnosis import Case, decide_verdict, game_plan
from specdoctor.engine.state import StateView
from specdoctor.models import AttributionFact, BreakevenAnalysis, CauseFact, TargetRequirement
from specdoctor.toolkit import ToolResult
from specdoctor.tools.checkout.bisect import BisectResult

MEASURE = {"baseline": {"median": 38.8, "samples": [38.6, 38.8, 39.0]},
           "spec": {"median": 77.7, "samples": [77.5, 77.7, 77.9], "accept_length": 2.77}}
NOT_REPRODUCED = {"baseline": {"claimed": 41.7, "outcome": "DIFFERENT"}, "spec": {"claimed": 84, "outcome": "DIFFERENT"}}
SITE = CauseFact(name="NCCL_P2P_DISABLE=1 set by sitecustomize.py", kind="env", key="NCCL_P2P_DISABLE",
                 effect_tps=-6.2, ci_low=-7.0, ci_high=-5.4, confirmed=True,
                 fix='remove `os.environ["NCCL_P2P_DISABLE"] = ...` from /venv/lib/python3.12/site-packages/'
                     'sitecustomize.py')


def _stored(tool: str, output: BaseModel) -> dict:
    return ToolResult(tool=tool, status="ok", summary="", output=output.model_dump(mode="json")).model_dump(mode="json")


def _view(attribution: AttributionFact | None = None, claims: dict | None = None, results: dict | None = None,
          **facts) -> StateView:
    if attribution is not None:
        facts["attribution"] = attribution.model_dump(mode="json")
    return StateView({"params": {}, "facts": {"measure": MEASURE, "claims": claims or {}, **facts},
                      "results": results or {}})


def _att(*causes: CauseFact, candidates: list[str] | None = None, restored: bool | None = None) -> AttributionFact:
    return AttributionFact(reference_tps=84.0, measured_tps=77.7, causes=list(causes), candidates=candidates or [],
                           restored=restored)


def test_a_confirmed_env_cause_makes_environment_and_the_sentence_names_it_with_its_share():
    v = decide_verdict(Case.of(_view(_att(SITE, restored=True), NOT_REPRODUCED)))
    assert v.verdict == "environment" and v.confidence >= 0.85
    assert "NCCL_P2P_DISABLE=1 set by sitecustomize.py: \u22126.2 tok/s [\u22127.0, \u22125.4] of \u22126.3" in v.sentence


def test_an_unconfirmed_cause_is_never_a_cause_and_candidates_make_inconclusive():
    maybe = SITE.model_copy(update={"confirmed": False})
    v = decide_verdict(Case.of(_view(_att(maybe, candidates=["NCCL_P2P_DISABLE: unset → 1 (sitecustomize.py)"]),
                             NOT_REPRODUCED)))
    assert v.verdict == "inconclusive" and "NCCL_P2P_DISABLE" in v.sentence and "could not decide" in v.sentence


def test_nothing_explained_and_claims_not_reproduced_says_which_figures_in_plain_words():
    v = decide_verdict(Case.of(_view(_att(), NOT_REPRODUCED, subtraction={"outcome": "SAME"})))
    assert v.verdict == "baseline-not-reproducible"
    assert "speculative 84 tok/s (measured today: 77.7)" in v.sentence
    assert "baseline 41.7 tok/s (measured today: 38.8)" in v.sentence and "not reproduced" in v.sentence


def test_claims_reproduced_is_no_regression_even_with_deltas_that_changed_nothing():
    v = decide_verdict(Case.of(_view(_att(), {"spec": {"claimed": 77.5, "outcome": "SAME"}})))
    assert v.verdict == "no-regression"


def test_code_culprit_wins_and_the_verdict_also_names_the_environment_cause():
    bis = _stored("bisect_patches", BisectResult(verdict="culprit", culprits=["python/x.py"], confirmed=True,
                                                 launches=4, naive_launches=5))
    v = decide_verdict(Case.of(_view(_att(SITE), NOT_REPRODUCED, results={"bisect": bis})))
    assert v.verdict == "code-regression" and v.culprits == ["python/x.py"]
    assert "NCCL_P2P_DISABLE=1 set by sitecustomize.py" in v.sentence


def test_an_nccl_cause_written_by_the_promotion_is_an_environment_cause_without_an_attribute_step():
    nccl = CauseFact(name="NCCL 2.26.2 → 2.27.3 (fixed by NCCL_PROTO=LL)", kind="software", key="nccl",
                     effect_tps=-5.0, ci_low=-6.0, ci_high=-4.1, confirmed=True, method="targeted-measurement",
                     fix="NCCL_PROTO=LL in the launch environment")
    v = decide_verdict(Case.of(_view(None, NOT_REPRODUCED, nccl_cause=nccl.model_dump(mode="json"))))
    assert v.verdict == "environment" and "NCCL 2.26.2 → 2.27.3" in v.sentence


def test_game_plan_puts_the_measured_fix_first_with_its_exact_command_and_the_drafter_after():
    be = _stored("breakeven", BreakevenAnalysis(
        decode_ms=25.0, baseline_tps=38.8, cycle_ms=30.0, cycle_source="throughput", tau_star=2.46, accept_len=1.8,
        steps=3, targets=[TargetRequirement(speedup=1.0, steps=3, alpha_needed=0.68, tau_needed=2.46),
                          TargetRequirement(speedup=1.2, steps=3, alpha_needed=0.8, tau_needed=2.95)]))
    view = _view(_att(SITE, restored=True), NOT_REPRODUCED, results={"breakeven": be})
    plan = game_plan(Case.of(view), decide_verdict(Case.of(view)))
    first = plan[0]
    assert first.basis == "measured" and first.gain_tps == 6.2 and first.command == SITE.fix
    assert "NCCL_P2P_DISABLE=1 set by sitecustomize.py" in first.title and first.cost.startswith("low")
    drafter = next(a for a in plan if a.title.startswith("Improve the drafter"))
    assert plan.index(drafter) > 0 and drafter.expected_gain.startswith("modelled")
    assert all(a.cost for a in plan)


def test_a_box_faster_than_claimed_reproduces_the_claim():
    """Today above the claim (comparator DIFFERENT, +6 %) is not a failure to reproduce it: no regression. The same
    distance below the claim is (the rule must not fire the other way)."""
    faster = {"baseline": {"claimed": 36.5, "outcome": "DIFFERENT", "pct_change": 6.3},
              "spec": {"claimed": 77.0, "outcome": "SAME", "pct_change": 0.9}}
    v = decide_verdict(Case.of(_view(_att(), faster)))
    assert v.verdict == "no-regression" and any("exceeded today (+6.3 %)" in r for r in v.reasons), v
    slower = {**faster, "baseline": {"claimed": 41.2, "outcome": "DIFFERENT", "pct_change": -5.8}}
    assert decide_verdict(Case.of(_view(_att(), slower))).verdict == "baseline-not-reproducible"


def test_an_nccl_setting_that_is_a_confirmed_cause_is_one_action_not_two():
    launch = "python -m sglang.launch_server --model-path /m --tp-size 4 --port 30000"
    cause = CauseFact(name="NCCL 2.26.2 → 2.27.3 (its default PROTO choice); NCCL_PROTO=LL restores", kind="software",
                      key="nccl", effect_tps=-3.0, ci_low=-4.0, ci_high=-2.0, confirmed=True,
                      fix=f"env NCCL_PROTO=LL {launch}")
    nccl = {"best": "PROTO=LL", "best_gain_pct": 6.1, "env": {"NCCL_PROTO": "LL"}, "unset": []}
    view = _view(_att(cause, restored=True), NOT_REPRODUCED, nccl=nccl)
    plan = game_plan(Case.of(view), decide_verdict(Case.of(view)))
    assert [a.command for a in plan if a.command and "NCCL_PROTO=LL" in a.command] == [cause.fix]
    assert not any(a.title.startswith("Set NCCL_PROTO=LL") for a in plan)
    # must not fire: a winner that is a tuning (no cause) keeps its own action
    tuning = _view(_att(), {"spec": {"claimed": 77.5, "outcome": "SAME"}}, nccl=nccl)
    assert any(a.title.startswith("Set NCCL_PROTO=LL") for a in game_plan(Case.of(tuning), decide_verdict(Case.of(tuning))))


def test_an_undecided_subtraction_leaves_the_patches_candidates_not_exonerated():
    v = decide_verdict(Case.of(_view(_att(), NOT_REPRODUCED, subtraction={"outcome": "UNKNOWN"})))
    assert v.verdict == "inconclusive" and "stay candidates" in v.sentence and "no code regressed" not in v.sentence
    assert any("subtraction UNKNOWN" in r for r in v.reasons)
    # must not fire: a subtraction that said SAME clears them, and none run (no local patches) has none to clear
    for sub in ({"outcome": "SAME"}, {}):
        assert decide_verdict(Case.of(_view(_att(), NOT_REPRODUCED, subtraction=sub))).verdict == "baseline-not-reproducible"


def test_claims_that_hold_are_not_unsettled_by_a_subtraction_no_bisection_confirmed():
    faster = {"outcome": "DIFFERENT", "comparison": {"outcome": "DIFFERENT", "verdict": "better"}}
    held = {"spec": {"claimed": 77.5, "outcome": "SAME", "pct_change": 0.3}}
    v = decide_verdict(Case.of(_view(_att(), held, subtraction=faster)))
    assert v.verdict == "no-regression" and any("no patch was confirmed by the bisection" in r for r in v.reasons)
    # must not fire: claims not reproduced and the same unconfirmed subtraction difference stays inconclusive
    assert decide_verdict(Case.of(_view(_att(), NOT_REPRODUCED, subtraction=faster))).verdict == "inconclusive"


def test_a_cause_larger_than_the_gap_says_so_instead_of_x_of_y():
    """Real H200 (env-var story): a revert trial ran faster than the claim, and the line read '−351.0 tok/s of −181.0'."""
    from specdoctor.diagnosis.attribution import cause_line
    from specdoctor.diagnosis.facts import AttributionFact, CauseFact

    att = AttributionFact.model_validate({"metric": "spec", "reference_tps": 662.2, "measured_tps": 481.2})
    big = CauseFact.model_validate({"name": "SGLANG_SIMULATE_ACC_LEN=1.6 set by launcher", "kind": "env",
                                    "key": "SGLANG_SIMULATE_ACC_LEN", "confirmed": True, "method": "revert-trial", "metric": "spec", "effect_tps": -351.0,
                                    "ci_low": -393.0, "ci_high": -331.9})
    line = cause_line(big, att)
    assert "more than the whole gap (−181.0)" in line and " of −181.0" not in line
    small = big.model_copy(update={"effect_tps": -170.0, "ci_low": -190.0, "ci_high": -150.0})
    assert cause_line(small, att).endswith("tok/s [−190.0, −150.0] of −181.0")
