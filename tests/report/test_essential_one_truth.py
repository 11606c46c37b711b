""""Essential" has one source of truth: the essentials step's list when it ran; triage's guess only when it did not.

A run whose essentials search started the server with no patch must not mark triage's guess essential in the
suspects table or the findings (the report contradicted itself). Built from a run state main checkpointed
(tests/fixtures/checkpoints/single-culprit.json: triage guesses kimi_k25.py, the user named it essential).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.engine import report_builder as rb
from specdoctor.engine.state import StateView
from specdoctor.models import MeasureFacts
from specdoctor.report import model as m

STATE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints" / "single-culprit.json")
                   .read_text())
KIMI = "python/sglang/srt/models/kimi_k25.py"


def _report(essential: list[str] | None) -> m.Report:
    state = copy.deepcopy(STATE)
    if essential is None:
        del state["results"]["essentials"]
    else:
        state["results"]["essentials"]["output"].update(essential=essential, source="search", launches=2)
    r = rb._Reader(StateView(state), SimpleNamespace(ids=lambda ev: [], ids_for_commands=lambda c: []))
    report = m.Report.model_construct(suspects=[], findings=[])
    rb._suspects(report, r)
    rb._findings(report, r, None, MeasureFacts.model_validate(state["facts"]["measure"]))
    return report


def _bisection(report: m.Report, path: str) -> str | None:
    return next(s.bisection for s in report.suspects if s.path == path)


def test_a_search_that_needed_no_patch_overrules_triages_guess():
    report = _report([])
    assert _bisection(report, KIMI) != "essential"
    titles = [f.title for f in report.findings]
    assert not any(t.startswith(f"{KIMI} is essential") for t in titles)
    assert any(t.startswith(f"{KIMI} looked essential to triage") for t in titles)


@pytest.mark.parametrize("essential", [[KIMI], None])
def test_the_step_s_list_or_without_it_triages_guess_marks_it_essential(essential):
    report = _report(essential)
    assert _bisection(report, KIMI) == "essential"
    assert any(f.title.startswith(f"{KIMI} is essential") for f in report.findings)
    assert not any("looked essential to triage" in f.title for f in report.findings)


def test_a_patch_the_search_needs_is_essential_though_triage_did_not_guess_it():
    other = "python/sglang/srt/layers/moe/topk.py"
    report = _report([other])
    assert _bisection(report, other) == "essential" and _bisection(report, KIMI) != "essential"
