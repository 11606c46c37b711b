"""The diagnosis: from what a run recorded to a verdict and a game plan, as one pure function (no host, no I/O).

    from specdoctor.diagnosis import Case, diagnose
    d = diagnose(Case.of(view))          # view: the run state's typed reader
    d.verdict.verdict, d.plan[0].title

Modules, in the order a reader follows a run: `facts` (what steps record, `RunFacts`, and the `Case` read from a
run), `claims` (a claim against today's runs), `causes` (causes that need no revert trial), `delta_causes` (a
delta the revert trials confirmed: its name and fix), `attribution` (the gap split into causes), `verdict` (the
rules, in order), `plan` (the ranked next actions), `outcome` (the models).
"""

from __future__ import annotations

from specdoctor.diagnosis.facts import Case, RunFacts, checked_facts
from specdoctor.diagnosis.outcome import Diagnosis, PlanAction, Verdict, VerdictName
from specdoctor.diagnosis.plan import game_plan
from specdoctor.diagnosis.verdict import decide_verdict

__all__ = ["Case", "Diagnosis", "PlanAction", "RunFacts", "Verdict", "VerdictName", "checked_facts",
           "decide_verdict", "diagnose", "game_plan"]


def diagnose(case: Case) -> Diagnosis:
    """The verdict the measured attribution supports, and the ranked actions that follow from it."""
    verdict = decide_verdict(case)
    return Diagnosis(verdict=verdict, plan=game_plan(case, verdict))
