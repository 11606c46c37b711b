"""A revert search's last lone delta is not launched again when both of its confirming arms were measured in trial
launches already (#46: the replicate repeated a configuration measured in the same run). Must not fire: in the
first round against your running server's runs (a trial launch may differ from your server), and where several
deltas are left (a replicate guards the choice among them)."""

from __future__ import annotations

import random

from specdoctor.engine.actions.attribute import TrialRun, search_deltas
from specdoctor.engine.actions.attribute_evidence import control_is_trial
from specdoctor.engine.state import StateView


def _runner(effects: dict[str, float], seed: int = 1):
    rng = random.Random(seed)
    launched: list[frozenset[str]] = []

    def run(kept, purpose, judge):
        launched.append(frozenset(kept))
        base = 100.0 - sum(effects.get(k, 0.0) for k in kept)
        samples: list[float] = []
        outcome = None
        while outcome is None and len(samples) < 14:
            samples += [base + rng.gauss(0, 1) for _ in range(5 if not samples else 3)]
            outcome = judge(samples)
        return TrialRun(kept=sorted(kept), reverted=[], samples=samples, outcome=outcome or "unresolved",
                        purpose=purpose)
    return run, launched


def _control(effects: dict[str, float], seed: int = 2) -> list[float]:
    rng = random.Random(seed)
    return [100.0 - sum(effects.values()) + rng.gauss(0, 1) for _ in range(6)]


def test_one_delta_against_a_trial_control_costs_one_launch():
    eff = {"NCCL_PROTO": 20.0}
    run, launched = _runner(eff)
    out = search_deltas(list(eff), run, _control(eff), control_is_trial=True)
    assert [c[0] for c in out.causes] == [["NCCL_PROTO"]]
    assert launched == [frozenset()]  # everything reverted; "kept alone" is today's trial launch


def test_one_delta_against_the_running_server_is_replicated():
    eff = {"NCCL_PROTO": 20.0}
    run, launched = _runner(eff)
    out = search_deltas(list(eff), run, _control(eff), control_is_trial=False)
    assert [c[0] for c in out.causes] == [["NCCL_PROTO"]]
    assert launched == [frozenset(), frozenset({"NCCL_PROTO"})]


def test_the_second_of_two_independent_causes_is_not_launched_again():
    eff = {"A": 10.0, "B": 10.0}
    run, launched = _runner(eff)
    out = search_deltas(list(eff), run, _control(eff))
    assert sorted(c[0][0] for c in out.causes) == ["A", "B"]
    assert len(launched) == len(set(launched)), launched  # no configuration launched twice


def test_an_innocent_lone_delta_is_not_named():
    eff = {"A": 20.0, "B": 0.0}
    run, _ = _runner(eff)
    out = search_deltas(list(eff), run, _control(eff), control_is_trial=True)
    assert [c[0] for c in out.causes] == [["A"]]


def test_control_from_a_launch_not_from_the_running_server():
    def view(label: str, other_workload: bool = False) -> StateView:
        facts = {"measure": {"spec": {"label": label, "samples": [1.0, 2.0, 3.0]},
                             "baseline": {"label": "baseline", "samples": [1.0, 2.0, 3.0]}}}
        if other_workload:
            facts["measure_today_workload"] = facts["measure"]
        return StateView({"params": {}, "facts": facts, "results": {}})

    assert control_is_trial(view("spec"), "spec") and control_is_trial(view("x"), "baseline")
    assert not control_is_trial(view("spec (running server)"), "spec")
    assert not control_is_trial(view("spec", other_workload=True), "baseline")


def test_the_plan_expects_no_replicate_for_a_lone_difference():
    from specdoctor.engine.plan_estimate import _PROFILE_EXPECTED, revert_search_expected

    assert revert_search_expected(1) == 1 + _PROFILE_EXPECTED  # everything reverted (its phase from that trial)
    assert revert_search_expected(2) == 3 + _PROFILE_EXPECTED
    # today's figure from your running server: the lone difference's other arm is replicated in a trial
    assert revert_search_expected(1, control_running=True) == 2 + _PROFILE_EXPECTED
