"""Re-estimate the plan when new facts come (reads only): before the stop (the plan in force when you consent) and
after reproduce and list_deltas (the revised plan). Nothing here decides what the run does: the caps, the steps and
their predicates are the first plan's; only the launches expected change (engine/plan_estimate.py has the rules)."""

from __future__ import annotations

from typing import Any

from specdoctor.engine.actions import ActionOutcome, action, run_tool
from specdoctor.engine.actions.nccl import promote_launches
from specdoctor.engine.actions.plan import gap_shown
from specdoctor.engine.gap import read_gap
from specdoctor.engine.identity import identity_of
from specdoctor.engine.plan_estimate import PlanFacts, facts_from_deltas, revise_phases
from specdoctor.engine.state import Decision, StateView
from specdoctor.models import ServerFact
from specdoctor.models.delta import DeltaList
from specdoctor.tools.checkout.commits import CommitCatalog
from specdoctor.tools.checkout.repo import Catalog
from specdoctor.tools.environment.deltas import list_deltas
from specdoctor.tools.nccl.nccl import NcclSweep
from specdoctor.tools.serving.plan import Plan, PlanInput, make_plan

__all__ = ["replan_run"]

_DELTA_ARGS = ("good_fingerprint", "fingerprint", "launch", "propagation", "measure", "catalog", "max_new_tokens")


def _changed(view: StateView) -> int:
    cat = view.latest(Catalog)
    return len({f.path for f in cat.files} | set(cat.untracked)) if cat is not None else 0


def _deltas(deps: Any, args: dict[str, Any], out: ActionOutcome, key: str) -> DeltaList | None:
    """list_deltas over what is known now (no launch: it reads fingerprints, the launch line and /proc's record)."""
    return run_tool(deps, list_deltas, {k: v for k, v in args.items() if k in _DELTA_ARGS and v is not None},
                    out.results, key=key).output


def plan_facts(deps: Any, view: StateView, stage: str, deltas: DeltaList | None) -> PlanFacts:
    """The facts a re-estimate reads, each from a step's typed result (see engine/plan_estimate.py)."""
    ident = identity_of(view)
    changed = _changed(view)
    judged = read_gap(view)
    commits = view.latest(CommitCatalog)
    sweep_ran = view.result("nccl", NcclSweep) is not None
    from specdoctor.engine.predicates import needs_nccl_sweep

    facts = PlanFacts(
        stage="revised" if stage == "revised" else "consent", changed=changed,
        code_open=bool(changed) and ident.code != "identical", essential_given=bool(view.params.essential),
        # before reproduce, the running server's figures (any measurement there is of it, not of a launch)
        gap=(not judged.held) if stage == "revised" and judged.judged else gap_shown(view),
        commits=len(commits.commits) if commits is not None else 0,
        config_differs=ident.launch == "differs" or ident.env == "differs", launch_unknown=ident.launch == "unknown",
        promote_launches=promote_launches(deps, view) if sweep_ran and needs_nccl_sweep(view) else None,
        control_running=_control_running(view, stage), workload_judged=_workload_judged(view))
    return facts_from_deltas(facts, deltas)


def _workload_judged(view: StateView) -> bool:
    """The claims were judged on the workload recorded behind them (the running server's or a launch's reading)."""
    facts = view.run_facts
    spec = facts.measure.spec if facts.measure is not None else None
    also = spec.also_measured() if spec is not None else None
    return facts.measure_today_workload is not None or (also is not None and also.median is not None)


def _control_running(view: StateView, stage: str) -> bool:
    """Today's speculative figure is (revised: was; consent: will be) your running server's, not a trial launch's."""
    from specdoctor.engine.actions.attribute_evidence import control_is_trial

    if stage == "revised":
        return not control_is_trial(view, "spec")
    server = view.run_facts.server or ServerFact()
    return bool(server.running) and any("speculative" in a for a in server.argv)


@action("read", args=("stage", *_DELTA_ARGS))
def replan_run(deps: Any, view: StateView, step: Any, args: dict[str, Any]) -> ActionOutcome:
    """Re-estimate the launches expected from what the reads found (the caps and the steps stay the first plan's)."""
    out = ActionOutcome()
    # the first plan: kept apart once re-estimated; until then the plan in force (`plan`, which the budget reads)
    recorded = view.run_facts
    raw = recorded.plan_first or recorded.plan
    if not isinstance(raw, dict):
        out.status, out.summary = "skipped", "no plan to revise (no running server to time a launch from)"
        out.decisions.append(Decision(step=step.id, title=step.title, status="skipped", checked="the plan",
                                      found="none", decided="nothing re-estimated", why=out.summary))
        return out
    first = Plan.model_validate(raw)
    stage = str(args.get("stage") or "consent")
    deltas = _deltas(deps, args, out, key=f"{step.id}_deltas")
    facts = plan_facts(deps, view, stage, deltas)
    phases, why = revise_phases(first.phases, facts)
    p = view.params
    plan = make_plan(first.cost, PlanInput(pid=first.cost.pid, port=first.port, phases=phases,
                                           requests_per_run=p.requests_per_run,
                                           max_new_tokens=p.max_new_tokens,
                                           stops_user_server=first.stops_user_server))
    if stage == "revised":
        out.facts.plan_revised = plan.model_dump(mode="json")
        label = "revised after the stop"
    else:
        out.facts.plan_first = first.model_dump(mode="json")
        out.facts.plan = plan.model_dump(mode="json")
        label = "before the stop (the plan you consent to)"
    out.summary = f"{label}: {plan.text} (first plan: expected {first.launches_expected:g})"
    out.decisions.append(Decision(
        step=step.id, title=step.title, checked="what the reads found since the first plan: every difference from "
        "the good run, the NCCL sweep's winners, the upstream commits" + (", the reproduced gap" if stage ==
                                                                          "revised" else ""),
        found=out.summary,
        decided="; ".join(f"{ph.step}: expected {ph.launches if ph.expected is None else ph.expected:g}, "
                          f"≤ {ph.launches}" for ph in phases) + "; " + "; ".join(why),
        why="the launches expected are re-estimated from the facts as they come; the user consents to the plan in "
            "force at the stop, and made ÷ expected is judged against it",
        evidence=out.commands(10)))
    return out
