"""A set confirmed together is one cause in the report: its one effect counts once against the gap."""

from __future__ import annotations

from specdoctor.engine.report_builder import report_causes
from specdoctor.models.delta import AttributionFact, CauseFact
from specdoctor.report.model import Attribution


def _cause(key: str, effect: float, together: list[str]) -> CauseFact:
    return CauseFact(name=f"local patch {key}", kind="code", key=key, effect_tps=effect, ci_low=effect - 2,
                     ci_high=effect + 2, confirmed=True, method="bisection", fix=f"git apply -R {key}.patch",
                     together=together)


def _attribution(*causes: CauseFact) -> Attribution:
    att = AttributionFact(reference_tps=51.6, measured_tps=42.7, causes=list(causes))
    return Attribution(reference=51.6, measured=42.7, causes=report_causes(att, []))


def test_two_patches_confirmed_together_are_one_cause_counted_once():
    # each member carries the set's effect (-5.3); their revert commands differ, so no figure matched them before
    att = _attribution(_cause("a.py", -5.3, ["b.py"]), _cause("b.py", -5.3, ["a.py"]))
    (one,) = att.causes
    assert one.name == "local patch a.py + local patch b.py" and one.delta == -5.3
    assert one.fix == "git apply -R a.py.patch && git apply -R b.py.patch"
    assert round(att.unexplained, 1) == -3.6  # -8.9 gap, -5.3 explained once (it read +1.7 with the set twice)


def test_independent_causes_with_equal_effects_stay_apart():
    """must not fire: two causes measured apart that happen to read the same effect are two shares of the gap."""
    att = _attribution(_cause("a.py", -4.4, []), _cause("b.py", -4.4, []))
    assert [c.name for c in att.causes] == ["local patch a.py", "local patch b.py"]
    assert round(att.unexplained, 1) == -0.1


def _plan(*causes: CauseFact) -> list:
    from specdoctor.diagnosis import Case, RunFacts, decide_verdict, game_plan
    from specdoctor.models import MeasuredFact, MeasureFacts

    facts = RunFacts(measure=MeasureFacts(spec=MeasuredFact(median=42.7, samples=[42.7] * 5)),
                     attribution=AttributionFact(reference_tps=51.6, measured_tps=42.7, causes=list(causes)))
    case = Case(facts=facts)
    return [a for a in game_plan(case, decide_verdict(case)) if a.confirmed]


def test_the_game_plan_lists_a_set_confirmed_together_once_with_its_one_gain():
    # before: "Revert local patch a.py +5.3" and "Revert local patch b.py +5.3", the set's gain counted twice
    (one,) = _plan(_cause("a.py", -5.3, ["b.py"]), _cause("b.py", -5.3, ["a.py"]))
    assert one.title == "Revert local patch a.py + local patch b.py" and one.gain_tps == 5.3
    assert one.command == "git apply -R a.py.patch && git apply -R b.py.patch"


def test_the_game_plan_keeps_independent_causes_with_equal_gains_apart():
    """must not fire: two causes measured apart are two actions, each with its own gain."""
    plan = _plan(_cause("a.py", -4.4, []), _cause("b.py", -4.4, []))
    assert [(a.title, a.gain_tps) for a in plan] == [("Revert local patch a.py", 4.4), ("Revert local patch b.py", 4.4)]
