"""The plan's re-estimate (#46): the launches expected follow the playbook's costs and the one expected cause."""

from __future__ import annotations

from specdoctor.engine.actions.plan import bisect_expected, regression_phases
from specdoctor.engine.plan_estimate import (
    PlanFacts,
    expected_cause,
    facts_from_deltas,
    revert_search_expected,
    revise_phases,
)
from specdoctor.models.delta import Delta, DeltaList, Revert
from specdoctor.tools.serving.plan import PlannedPhase

COMMON = dict(runs=5, max_runs=15, finalists=3, spec_running=True, tp_size=2, stops_user_server=True)


def _exp(phases: list[PlannedPhase]) -> dict[str, float]:
    return {p.step: (p.launches if p.expected is None else p.expected) for p in phases}


def _env(name: str, source: str = "launch line", kind: str = "env") -> Delta:
    return Delta(kind=kind, name=name, reference=None, current="1", source=source, revertible=True,  # type: ignore[arg-type]
                 revert=Revert(unset=[name]), impact="high")


def test_a_differing_flag_expects_the_revert_search_over_the_listed_differences_not_the_patch_search():
    first = regression_phases(changed=8, essential_given=False, **COMMON)
    deltas = DeltaList(deltas=[_env("CUDA_LAUNCH_BLOCKING"), _env("attention_backend", kind="launch-flag"),
                               _env("SGLANG_X"), _env("OTHER")])
    f = facts_from_deltas(PlanFacts(changed=8, code_open=True, config_differs=True, launch_unknown=False), deltas)
    assert expected_cause(f) == "config"
    exp = _exp(revise_phases(first, f)[0])
    assert exp["bisect"] == 0 and exp["essentials"] == 1 and exp["subtract"] == 1
    assert exp["attribute"] == revert_search_expected(4) == 2 + 2  # the cause's phase: from those trials (#46)
    attribute = next(p for p in revise_phases(first, f)[0] if p.step == "attribute")
    assert attribute.launches >= attribute.expected  # the cap grows to what the listed differences can cost


def test_an_engine_forced_variable_is_no_suspect_so_the_patches_are_searched():
    # harmless-diffs: the env digest differs only by a variable the engine sets at every start; the culprit is a patch
    first = regression_phases(changed=8, essential_given=False, **COMMON)
    f = facts_from_deltas(PlanFacts(changed=8, code_open=True, config_differs=True, launch_unknown=False),
                          DeltaList(deltas=[_env("CUDA_MODULE_LOADING", source="engine-forced")]))
    assert expected_cause(f) == "code"
    exp = _exp(revise_phases(first, f)[0])
    assert exp["bisect"] == bisect_expected(8) and exp["attribute"] == 1  # the all-reverted trial still runs


def test_nccl_variables_are_the_promotions_to_settle():
    first = regression_phases(changed=0, essential_given=True, **COMMON)
    deltas = DeltaList(deltas=[_env("NCCL_ALGO", source="launch shell"), _env("NCCL_PROTO")])
    promoting = facts_from_deltas(PlanFacts(config_differs=True, promote_launches=3), deltas)
    exp = _exp(revise_phases(first, promoting)[0])
    assert exp["nccl_promote"] == 3 and exp["attribute"] == 1
    # must not fire: a variable a sitecustomize.py forces in every process is no relaunch's to change
    forced = _env("NCCL_P2P_DISABLE", source="sitecustomize.py").model_copy(
        update={"revert": Revert(undo_sitecustomize=["NCCL_P2P_DISABLE"])})
    inside = facts_from_deltas(PlanFacts(config_differs=True, promote_launches=3), DeltaList(deltas=[forced]))
    assert _exp(revise_phases(first, inside)[0])["attribute"] == revert_search_expected(1)
    # must not fire: nccl.conf or a launcher script sets it again at every relaunch
    for src in ("/etc/nccl.conf", "launcher", "~/.bashrc"):
        again = facts_from_deltas(PlanFacts(config_differs=True, promote_launches=3),
                                  DeltaList(deltas=[_env("NCCL_P2P_LEVEL", source=src)]))
        assert _exp(revise_phases(first, again)[0])["attribute"] == revert_search_expected(1), src
    # must not fire: no promotion runs (nothing better, or no sweep) -> the revert search is expected over both
    alone = facts_from_deltas(PlanFacts(config_differs=True, promote_launches=0), deltas)
    assert _exp(revise_phases(first, alone)[0])["attribute"] == revert_search_expected(2)


def test_a_hardware_difference_spares_the_searches_but_not_their_entry_launches():
    first = regression_phases(changed=8, essential_given=True, **COMMON)
    hw = Delta(kind="hardware", name="pcie-link", reference="Gen5 x16", current="Gen3 x16", impact="high")
    f = facts_from_deltas(PlanFacts(changed=8, code_open=True, essential_given=True, launch_unknown=False),
                          DeltaList(deltas=[hw]))
    assert expected_cause(f) == "hardware"
    exp = _exp(revise_phases(first, f)[0])
    assert exp["subtract"] == 2 and exp["bisect"] == 0 and exp["attribute"] == 0
    # must not fire: a low-impact hardware note is no cause; the patches are searched
    low = facts_from_deltas(PlanFacts(changed=8, code_open=True, essential_given=True),
                            DeltaList(deltas=[hw.model_copy(update={"impact": "low"})]))
    assert expected_cause(low) == "code" and _exp(revise_phases(first, low)[0])["bisect"] == bisect_expected(8)


def test_moved_head_expects_the_commit_search_and_only_the_patch_entry():
    first = regression_phases(changed=2, essential_given=True, **COMMON)
    commits = PlannedPhase(step="bisect_commits", launches=7, runs=6)
    phases = [*first[:-1], commits, first[-1]]
    f = PlanFacts(changed=2, code_open=True, essential_given=True, commits=30, launch_unknown=False)
    exp = _exp(revise_phases(phases, f)[0])
    # the cap's last 2 (the culprit and its parent profiled) come from the probes' own servers (#46)
    assert exp["bisect_commits"] == 7 - 2 and exp["bisect"] == 0 and exp["subtract"] == 2
    held = f.model_copy(update={"gap": False})  # every claim held: no explaining launch, the caps stay
    revised = revise_phases(phases, held)[0]
    assert all(_exp(revised)[s] == 0 for s in ("subtract", "bisect", "bisect_commits", "attribute"))
    assert [p.launches for p in revised] == [p.launches for p in phases]


def test_a_workload_difference_expects_no_search():
    first = regression_phases(changed=3, essential_given=False, **COMMON)
    wl = Delta(kind="workload", name="dataset", reference="humaneval", current="specdoctor prompts", impact="high")
    f = facts_from_deltas(PlanFacts(changed=3, code_open=True, config_differs=True), DeltaList(deltas=[wl]))
    assert expected_cause(f) == "workload"
    assert sum(_exp(revise_phases(first, f)[0]).values()) == 1 + 1  # reproduce and the restart


def test_the_promotion_counts_the_current_setting_and_each_candidate_once_or_one_launch_when_variables_are_dropped():
    from specdoctor.tools.nccl.nccl_promote import PromoteInput, planned_launches

    args = PromoteInput(command="python -m sglang.launch_server --model-path m", current={"NCCL_ALGO": "Ring"},
                        good={"NCCL_ALGO": "Tree"})
    assert planned_launches(args) == 1 + 2  # the current setting, then 'remove NCCL_ALGO' and 'as in the good run'
    assert planned_launches(args.model_copy(update={"reference_first": False})) == 1  # the proof, then the end
    assert planned_launches(PromoteInput(command=args.command)) == 0


def test_before_the_stop_the_gap_is_the_running_servers_and_after_reproduce_the_measured_one():
    """no-regression's consent plan expected 10 launches where 2 were made: the running server's spec figure (in
    facts.measure before any launch) was read as a measured gap, the baseline claim being 'not measured today'."""
    from specdoctor.engine.actions.replan import plan_facts
    from specdoctor.engine.state import StateView

    held = {"claimed": 94.0, "outcome": "SAME", "median": 95.0, "ci_low": 93.5, "ci_high": 96.0, "pct_change": 1.0}
    state = {"params": {"expect": {"spec": 94.0, "baseline": 89.0}}, "results": {}, "decisions": [],
             "facts": {"claims": {"spec": held}, "measure": {"spec": {"samples": [95.0, 94.8, 95.3], "median": 95.0}}}}
    assert not plan_facts(None, StateView(state), "consent", None).gap  # every claim judged there held
    # after reproduce the measured reading decides: the baseline claim was never measured, so a gap stays open
    assert plan_facts(None, StateView(state), "revised", None).gap


def test_a_workload_the_claims_were_judged_on_is_not_the_expected_cause():
    # the running server measured with the recorded workload before the stop: a gap left is not the workload's
    f = PlanFacts(changed=3, code_open=True, workload=["dataset"])
    assert expected_cause(f) == "workload"
    assert expected_cause(f.model_copy(update={"workload_judged": True})) == "code"
    assert expected_cause(f.model_copy(update={"workload_judged": True, "gap": False})) == "none"
