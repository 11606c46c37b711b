"""Every figure states its workload: report.json carries it, report.md says it, a claim measured under another
workload is flagged (not silently compared), and the fingerprint a user saves records it."""

from __future__ import annotations

import json

from specdoctor.diagnosis import RunFacts
from specdoctor.engine.report_builder import fill_workload
from specdoctor.models import MeasuredFact, MeasureFacts, Measurement
from specdoctor.models.workload import Workload
from specdoctor.report.markdown import render_markdown
from specdoctor.report.model import MetricComparison, Report, RunMeta
from specdoctor.tools.serving.measure import PROMPTS, default_workload


def _report(facts: RunFacts) -> Report:
    r = Report(verdict="no-regression", meta=RunMeta(),
               claims=[MetricComparison(metric="spec", claimed=120.0, samples=[118.0, 121.0], median=119.5)],
               measurements=[Measurement(label="spec", samples=[118.0, 121.0], median=119.5)])
    fill_workload(r, facts)
    return r


def test_the_workload_is_in_json_and_md_and_claims_without_one_say_so():
    today = default_workload(128)
    facts = RunFacts(measure=MeasureFacts(spec=MeasuredFact(median=119.5, workload=today)))
    r = _report(facts)
    data = json.loads(r.model_dump_json())
    assert data["workload"]["prompts"] == list(PROMPTS) and data["workload"]["output_tokens"] == 128
    assert data["workload"]["concurrency"] == 1 and data["workload_differences"] == []
    md = render_markdown(r)
    line = "fixed chat prompts (6), 128 output tokens, temperature 0, 1 request at a time"
    assert f"Workload of every figure below: {line}." in md
    assert "The claims record no workload" in md and "⚠" not in md


def test_claims_from_another_workload_are_flagged():
    recorded = Workload(dataset="humaneval", prompt_example="def add(a, b):", prompt_tokens=140, output_tokens=128,
                        temperature=0.0, concurrency=1)
    like = Workload(prompts=recorded.request_prompts(), output_tokens=128, temperature=0.0, concurrency=1)
    facts = RunFacts.model_validate({
        "measure": {"spec": {"median": 150.0, "workload": like.model_dump()}},
        "workload": {"recorded": recorded.model_dump(), "source": "the good run",
                     "today": default_workload(128).model_dump(),
                     "differences": ["dataset: fixed chat prompts → humaneval"]}})
    r = _report(facts)
    assert r.workload is not None and r.workload.dataset == "humaneval"   # the figures ran the claims' prompts
    assert r.claims_workload_source == "the good run" and r.workload_differences
    md = render_markdown(r)
    claims = md.split("## Claims vs measured", 1)[1].split("\n## ", 1)[0]
    assert "⚠ The claims were measured on another workload (recorded by the good run: dataset: fixed chat prompts " \
           "→ humaneval)" in claims
