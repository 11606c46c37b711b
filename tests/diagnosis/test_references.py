"""References as people have them: --expect beyond tok/s, and a good run's measurements as the claims."""

from __future__ import annotations

import pytest

from specdoctor.commands.preflight import parse_expect
from specdoctor.diagnosis.references import FROM_FINGERPRINT, claims_for, fingerprint_claims, judge_claims
from specdoctor.errors import UsageError
from specdoctor.models import ClaimFact
from specdoctor.models.facts import MeasureFacts
from specdoctor.models.phases import PhaseTimes

SPEC = {"samples": [60.1, 59.8, 60.4, 60.0, 59.9], "decode_samples": [62.0, 61.8, 62.3, 61.9, 62.1],
        "runs": [{"accept_length": a} for a in (2.31, 2.29, 2.30, 2.32, 2.28)]}
PHASES = PhaseTimes.model_validate({"source": "profiler-gpu", "verify_ms": {
    "ms": 29.1, "samples": [29.0, 29.2, 28.9, 29.3, 29.1, 29.0], "source": "profiler trace"}})


def _spec(spec: dict) -> MeasureFacts:
    return MeasureFacts.model_validate({"spec": spec})


def test_expect_takes_what_people_quote_besides_tok_s():
    got = parse_expect("spec=94,verify_ms=19,draft_ms=1.1,accept_len=3.1,tpot_ms=12")
    assert got == {"spec": 94.0, "verify_ms": 19.0, "draft_ms": 1.1, "accept_len": 3.1, "tpot_ms": 12.0}
    for bad in ("latency=3", "verify_ms=-1", "verify_ms=nan", "spec=1,spec=2"):
        with pytest.raises(UsageError):
            parse_expect(bad)


def test_a_time_that_grew_is_not_reached_and_one_that_shrank_is_bettered():
    slow = judge_claims({"verify_ms": 19.0}, None, _spec(SPEC), PHASES).root["verify_ms"]
    c = ClaimFact.model_validate(slow)
    assert c.unit == "ms" and not c.higher_is_better and c.outcome == "DIFFERENT" and c.not_reached
    assert "phase profile" in c.measured_by and c.source == "--expect"
    fast = ClaimFact.model_validate(judge_claims({"verify_ms": 40.0}, None, _spec(SPEC), PHASES).root["verify_ms"])
    assert fast.outcome == "DIFFERENT" and not fast.not_reached  # faster than claimed reproduces the claim
    held = ClaimFact.model_validate(judge_claims({"verify_ms": 29.1}, None, _spec(SPEC), PHASES).root["verify_ms"])
    assert held.outcome == "SAME"


def test_accept_length_and_tpot_are_judged_on_the_speculative_runs():
    got = judge_claims({"accept_len": 3.1, "tpot_ms": 16.1}, None, _spec(SPEC), None)
    acc, tpot = ClaimFact.model_validate(got.root["accept_len"]), ClaimFact.model_validate(got.root["tpot_ms"])
    assert acc.unit == "tokens" and acc.not_reached and acc.median == pytest.approx(2.30)
    assert tpot.outcome == "SAME" and tpot.median == pytest.approx(1000 / 62.0, rel=1e-3)  # prefill excluded
    assert judge_claims({"draft_ms": 1.0}, None, _spec(SPEC), None).root == {}  # no phase profile: nothing to judge


def test_the_good_runs_measurements_are_the_claims_only_without_expect():
    good = {"measurements": {"baseline_tps": 41.7, "spec_tps": 83.7, "accept_length": 2.77, "note": "x"}}
    assert fingerprint_claims(good) == {"baseline": 41.7, "spec": 83.7, "accept_len": 2.77}
    assert claims_for({}, good) == ({"baseline": 41.7, "spec": 83.7, "accept_len": 2.77}, FROM_FINGERPRINT)
    # must not fire: --expect given (it wins whole), or a fingerprint without measurements
    assert claims_for({"spec": 60.0}, good) == ({"spec": 60.0}, "--expect")
    assert claims_for({}, {"commit": "abc"}) == ({}, "--expect")
    assert fingerprint_claims({"measurements": {"spec_tps": 0, "baseline_tps": True}}) == {}
    judged = judge_claims({}, good, _spec(SPEC), None)
    assert set(judged.root) == {"spec", "accept_len"}  # no baseline measured: no baseline claim judged
    assert all(ClaimFact.model_validate(c).source == FROM_FINGERPRINT for c in judged.root.values())
    assert judged.root["spec"].not_reached


def test_the_verdict_speaks_in_the_claims_own_units_and_names_the_good_run():
    from specdoctor.diagnosis import Case, diagnose
    from specdoctor.diagnosis.facts import RunFacts

    spec = {**SPEC, "median": 60.0}
    claims = judge_claims({"verify_ms": 19.0}, None, _spec(spec), PHASES)
    d = diagnose(Case(facts=RunFacts.model_validate({"measure": {"spec": spec, "baseline": spec}, "claims": claims.model_dump(mode="json"),
                                                     "subtraction": {"outcome": "SAME"}}),
                      expect={"verify_ms": 19.0}))
    assert d.verdict.verdict == "baseline-not-reproducible"
    assert any("verify_ms 19.0 is DIFFERENT from measured 29.1 ms" in r for r in d.verdict.reasons), d.verdict.reasons
    good = {"measurements": {"spec_tps": 60.0}}
    held = judge_claims({}, good, _spec(spec), None)
    d = diagnose(Case(facts=RunFacts.model_validate({"measure": {"spec": spec, "baseline": spec}, "claims": held.model_dump(mode="json")})))
    assert d.verdict.verdict == "no-regression"
    assert any(r.startswith("the good run's spec 60.0 is within noise") for r in d.verdict.reasons), d.verdict.reasons
