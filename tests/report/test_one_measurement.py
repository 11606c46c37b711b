"""One measurement model (issue #45): the benchmark's output, the fact an action saves and the report's measurement
are one `Measurement`, so a benchmark's figures reach the report with one conversion — the checkpoint's JSON read
back as the fact — and the report keeps the shape it had when it copied them field by field."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from specdoctor.engine import report_builder as rb
from specdoctor.engine.state import StateView
from specdoctor.models import MeasuredFact, MeasureFacts, Measurement
from specdoctor.report import model as m
from specdoctor.tools.serving.measure import BenchmarkResult, RunResult

CHECKPOINTS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints").glob("*.json"))


def _measured(state: dict, measure: MeasureFacts | None = None) -> m.Report:
    """The report's measurement table built from a run state (and its facts read once), as build_report does."""
    view = StateView(state)
    reader = rb._Reader(view, SimpleNamespace(ids=lambda ev: [], ids_for_commands=lambda c: []))
    report = m.Report.model_construct(measurements=[])
    rb._measurements(report, measure or view.run_facts.measure or MeasureFacts(), reader)
    return report


def test_a_benchmarks_output_reaches_the_report_with_one_conversion():
    assert issubclass(BenchmarkResult, Measurement) and issubclass(MeasuredFact, Measurement)
    bench = BenchmarkResult(label="spec", port=30000, samples=[101.0, 99.5, 100.2], median=100.2, ci_low=99.5,
                            ci_high=101.0, mean=100.23, stdev=0.75, tpot_ms=9.9, accept_length=2.4, cuda_graph=True,
                            runs=[RunResult(tok_s=101.0)], speculative=True)
    # the reproduce step saves the benchmark's output as its fact (measure_config); the checkpoint keeps JSON
    state = json.loads(json.dumps({"facts": {"measure": {"spec": dict(bench.model_dump(mode="json"), label="spec",
                                                                      env={})}}, "results": {}}))
    measure = StateView(state).run_facts.measure        # the one conversion: the checkpoint's JSON → model
    assert measure is not None and measure.spec is not None
    fact = measure.spec
    report = _measured(state, measure)
    [shown] = report.measurements
    assert isinstance(shown, MeasuredFact) and shown.samples is fact.samples   # the fact as it is, not rebuilt
    figures = set(Measurement.model_fields) - {"label", "evidence"}
    assert {k: getattr(shown, k) for k in figures} == {k: getattr(bench, k) for k in figures}
    assert shown.evidence == m.Evidence(step="reproduce")
    saved = json.loads(report.model_dump_json())["measurements"][0]
    assert list(saved) == list(Measurement.model_fields)    # report.json holds the measurement's fields only
    assert Measurement.model_validate(saved).median == bench.median


@pytest.mark.parametrize("path", CHECKPOINTS, ids=[p.stem for p in CHECKPOINTS])
def test_saved_checkpoints_reach_the_report_as_the_field_by_field_copy_did(path: Path):
    state = json.loads(path.read_text())
    report = _measured(state)
    raw = state["facts"]["measure"]
    view = StateView(state)
    reader = rb._Reader(view, SimpleNamespace(ids=lambda ev: []))
    want = []
    for key in ("baseline", "spec"):
        f = raw.get(key)
        if not f or f.get("median") is None:
            continue
        bench_key = f"bench_{key}" if view.tool_result(f"bench_{key}") or key != "spec" else "bench_spec_running"
        copied = Measurement(label=f.get("label") or key, samples=f.get("samples", []), median=f["median"],
                             ci_low=f.get("ci_low"), ci_high=f.get("ci_high"), tpot_ms=f.get("tpot_ms"),
                             accept_length=f.get("accept_length"), cuda_graph=f.get("cuda_graph"),
                             evidence=reader.evidence("reproduce", bench_key))
        want.append(copied.model_dump(mode="json"))
    assert want, "every saved story measured something"
    assert json.loads(report.model_dump_json())["measurements"] == want
