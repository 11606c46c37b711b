"""The gap and the causes that explain it are in one unit: a baseline gap is not 'explained' by a spec-tok/s effect.

Seen on a story other than the corpus' (a rope patch found by the bisection, whose effect is spec tok/s, beside a
baseline gap: "-7.0 of -3.0, +4.0 not explained"); the same mix showed in decode-regression and code-and-env."""

from __future__ import annotations

from specdoctor.engine.actions.attribute import _in_the_causes_unit
from specdoctor.engine.state import StateView
from specdoctor.models import AttributionFact, CauseFact, MeasureFacts
from specdoctor.report.attribution_model import Attribution, Cause

BASE = [24.6, 24.8, 24.9, 24.7, 24.8]
SPEC = [47.2, 46.8, 47.5, 46.9, 47.1]


def _view() -> StateView:
    claims = {"baseline": {"metric": "baseline", "claimed": 27.8, "outcome": "DIFFERENT"},
              "spec": {"metric": "spec", "claimed": 51.6, "outcome": "DIFFERENT"}}
    measure = {"baseline": {"label": "baseline", "samples": BASE}, "spec": {"label": "spec", "samples": SPEC}}
    return StateView({"params": {}, "facts": {"claims": claims, "measure": measure}, "results": {}})


def _fact(*causes: CauseFact) -> AttributionFact:
    return AttributionFact(metric="baseline", reference_tps=27.8, measured_tps=24.8, causes=list(causes))


def _code(metric: str = "spec", effect: float | None = -4.2) -> CauseFact:
    return CauseFact(name="local patch llama.py", kind="code", key="llama.py", metric=metric, effect_tps=effect,
                     confirmed=True, method="bisection")


def test_the_gap_is_read_on_the_figure_every_measured_cause_was_measured_on():
    v = _view()
    fact = _fact(_code())
    _in_the_causes_unit(v, v.fact("measure", MeasureFacts), fact)
    assert (fact.metric, fact.reference_tps, fact.measured_tps) == ("spec", 51.6, 47.1)
    assert fact.measured_ci_low is not None and fact.measured_ci_low <= 47.1 <= fact.measured_ci_high


def test_mixed_units_or_no_measured_effect_leave_the_trials_figure():
    v = _view()
    env = CauseFact(name="NCCL_P2P_DISABLE=1", kind="env", key="NCCL_P2P_DISABLE", metric="baseline", effect_tps=-3.0,
                    confirmed=True, method="revert-trial")
    for fact in (_fact(_code(), env), _fact(_code(effect=None)), _fact(_code(metric="baseline"))):
        before = fact.model_dump()
        _in_the_causes_unit(v, v.fact("measure", MeasureFacts), fact)
        assert fact.model_dump() == before


def test_a_cause_on_another_figure_is_shown_apart_and_not_subtracted():
    att = Attribution(metric="baseline", reference=27.8, measured=24.8, causes=[
        Cause(name="NCCL_P2P_DISABLE=1", kind="environment", delta=-3.0),
        Cause(name="local patch llama.py", kind="code", delta=-4.2, metric="spec")])
    assert [c.name for c in att.in_unit()] == ["NCCL_P2P_DISABLE=1"]
    assert [c.name for c in att.other_unit()] == ["local patch llama.py"]
    assert round(att.unexplained, 6) == 0.0  # -3.0 of -3.0: the spec effect is not part of the baseline gap
