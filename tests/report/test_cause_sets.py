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
    assert one.fix == "git apply -R a.py.patch; git apply -R b.py.patch"
    assert round(att.unexplained, 1) == -3.6  # -8.9 gap, -5.3 explained once (it read +1.7 with the set twice)


def test_independent_causes_with_equal_effects_stay_apart():
    """must not fire: two causes measured apart that happen to read the same effect are two shares of the gap."""
    att = _attribution(_cause("a.py", -4.4, []), _cause("b.py", -4.4, []))
    assert [c.name for c in att.causes] == ["local patch a.py", "local patch b.py"]
    assert round(att.unexplained, 1) == -0.1
