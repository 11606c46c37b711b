"""The Report model: JSON Schema validation of a written report, partial reports, strictness, loading."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from specdoctor.errors import UsageError
from specdoctor.report import Report, load_report, report_schema, write_report
from specdoctor.report.doc import SECTION_IDS
from specdoctor.report.model import SCHEMA_VERSION, RunMeta
from specdoctor.tools.breakeven.breakeven import BreakevenAnalysis


def test_written_report_validates_against_schema(seed: Report, tmp_path: Path) -> None:
    paths = write_report(seed, tmp_path)
    data = json.loads(paths["json"].read_text())
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema)
    assert data["schema_version"] == SCHEMA_VERSION
    # the schema is strict: a misspelt field or a wrong verdict must be rejected
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "verdikt": "x"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "verdict": "probably-fine"}, schema)


def test_round_trip_keeps_everything(seed: Report, tmp_path: Path) -> None:
    write_report(seed, tmp_path)
    back = load_report(tmp_path)
    assert back.breakeven is not None and back.breakeven.tau_star == pytest.approx(2.46, abs=0.01)
    assert [c.outcome for c in back.claims] == ["DIFFERENT", "DIFFERENT"]
    assert back.gates[0].values["rank 7"] is None
    assert back.env_propagation[0].workers["0"] == "LL"      # int ranks stored as JSON string keys
    assert back.stash is not None and [x.level for x in back.stash.ambiguous] == ["skip", "warn", "skip"]
    # secrets are scrubbed on the way to disk
    assert "hf_abcdefghijklmnop" not in (tmp_path / "report.json").read_text()
    assert back.commands[-1].command.startswith("HF_TOKEN=***REDACTED***")


def test_partial_report_renders_every_section(tmp_path: Path) -> None:
    partial = Report(verdict="inconclusive", meta=RunMeta(status="interrupted", error="interrupted (SIGINT)"))
    paths = write_report(partial, tmp_path)
    md = paths["md"].read_text()
    assert md.count("\n## ") == len(SECTION_IDS)
    assert "This report is interrupted: interrupted (SIGINT)" in md
    assert "Not run in this investigation." in md
    html = paths["html"].read_text()
    assert html.count("<section id=") == len(SECTION_IDS)
    assert "<img" not in html                                # no data, no plots


def test_model_is_strict_and_validates_assignment(seed: Report) -> None:
    with pytest.raises(ValidationError):
        Report(verdict="no-regression", surprise=1)           # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Report(verdict="no-regression", confidence=1.5)
    r = Report(verdict="no-regression")
    assert seed.breakeven is not None
    r.breakeven = seed.breakeven.model_dump()                 # the engine may hand over a plain dict
    assert isinstance(r.breakeven, BreakevenAnalysis)


def test_load_report_refuses_other_major_version_and_garbage(seed: Report, tmp_path: Path) -> None:
    p = tmp_path / "report.json"
    p.write_text(json.dumps({**seed.model_dump(mode="json"), "schema_version": "2.0"}))
    with pytest.raises(UsageError, match="schema_version"):
        load_report(p)
    p.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_report(tmp_path)
    with pytest.raises(UsageError, match="no report"):
        load_report(tmp_path / "missing")
