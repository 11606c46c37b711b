"""RunFacts: every fact a step records is declared and typed; the diagnosis is a pure function of the case.

The fixtures under tests/fixtures/checkpoints/ are the last checkpointed states of runs made by main before the
diagnosis package existed (see that folder's README): their facts must still validate (a checkpoint written then
resumes), and `diagnose()` on them must reach the verdict and game plan that main itself recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specdoctor.diagnosis import Case, RunFacts, diagnose
from specdoctor.engine.state import ResultShapeError, StateView, merge_facts
from specdoctor.models import Claims, MeasureFacts

_OVERSHOOT = re.compile(r", more than the whole gap \((.+?)\): its trials ran faster than the claimed figure")
# Box time (#46): "confirmed both ways" now says it was measured and names the patch (true for one or several).
_BOTH_WAYS = re.compile(r"confirmed both ways, measured: (\S+) alone on the essentials is slow,")
CHECKPOINTS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints").glob("*.json"))


def test_an_undeclared_fact_fails_at_the_write_in_one_line_naming_it():
    with pytest.raises(ResultShapeError) as exc:
        merge_facts({"measure": {}}, {"mesure": {"spec": {}}})
    msg = str(exc.value)
    assert "'mesure' is not a declared fact" in msg and "\n" not in msg


def test_a_fact_of_the_wrong_shape_fails_at_the_write_naming_fact_and_field():
    with pytest.raises(ResultShapeError, match=r"fact 'measure': field spec\.median"):
        merge_facts({}, {"measure": {"spec": {"median": "fast"}}})


def test_a_write_checks_only_what_it_writes_and_keeps_the_json_as_written():
    old = {"server": {"running": True, "port": 30000, "cwd": "/srv"}}  # `cwd` is not a ServerFact field: kept
    merged = merge_facts(old, {"launch": "python -m sglang.launch_server --port 30000"})
    assert merged["server"] == old["server"] and merged["launch"].endswith("30000")
    assert StateView({"facts": merged}).run_facts.server.port == 30000  # type: ignore[union-attr]


def test_diagnose_needs_no_run_state_only_a_case():
    facts = RunFacts(measure=MeasureFacts.model_validate({"spec": {"median": 60.0, "samples": [59, 60, 61]}}),
                     claims=Claims.model_validate({"spec": {"claimed": 94.0, "outcome": "DIFFERENT",
                                                            "pct_change": -36.0}}),
                     subtraction={"outcome": "SAME"})  # type: ignore[arg-type]
    d = diagnose(Case(facts=facts, expect={"spec": 94.0}))
    assert d.verdict.verdict == "baseline-not-reproducible" and d.plan[-1].title.startswith("Record an environment")
    facts.subtraction = None
    assert diagnose(Case(facts=facts, expect={"spec": 94.0})).verdict.confidence < d.verdict.confidence


@pytest.mark.parametrize("path", CHECKPOINTS, ids=[p.stem for p in CHECKPOINTS])
def test_a_checkpoint_from_before_validates_and_diagnoses_as_main_did(path: Path):
    state = json.loads(path.read_text())
    view = StateView(state)
    recorded = view.run_facts  # every fact of that run is declared, and of its declared shape
    assert recorded.verdict is not None and recorded.game_plan
    d = diagnose(Case.of(view))
    # One deliberate change since these were recorded (real H200, env-var story): a cause whose effect exceeds the
    # whole gap no longer reads "X of Y". Undo exactly that wording; everything else must be as main recorded it.
    reasons = [_BOTH_WAYS.sub("confirmed both ways: alone on the essentials it is slow,",
                              _OVERSHOOT.sub(r" of \1", line)) for line in d.verdict.reasons]
    assert d.verdict.model_copy(update={"reasons": reasons}) == recorded.verdict
    # One deliberate change to the plan since (#48): the what-if levers add their modelled actions, and a modelled
    # verify-graph lever replaces the bare "check why verify does not replay a CUDA graph". Every other recorded
    # action is as main recorded it, in the same order.
    kept = [a.model_copy(update={"lever": None, "modelled": None, "measured_gain_tps": None}) for a in d.plan
            if not (a.modelled is not None and a.basis == "modelled" and not a.confirmed)]
    replaced = any(a.lever in ("verify-graph", "cuda-graph") for a in d.plan)
    assert kept == [a for a in recorded.game_plan if not (replaced and a.title.startswith("Check why verify"))]


def test_the_checkpoint_fixtures_cover_every_verdict_kind_they_claim():
    kinds = {json.loads(p.read_text())["facts"]["verdict"]["verdict"] for p in CHECKPOINTS}
    assert {"code-regression", "environment", "no-regression", "baseline-not-reproducible"} <= kinds
