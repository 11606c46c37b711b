"""report.md snapshots for two scenarios (timestamps and measured values normalised, values checked by range)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from specdoctor.report import render_markdown
from specdoctor.report.doc import SECTION_IDS, build
from specdoctor.report.model import Report

from .report_builders import code_regression_report, seed_report

SNAPSHOTS = Path(__file__).parent / "snapshots"
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_DECIMAL = re.compile(r"[-+]?\d+\.\d+")
_DURATION = re.compile(r"\d+ (?:min \d+ s|h \d+ min)")
_PERCENT = re.compile(r"[-+]\d+%")


def normalise(md: str) -> str:
    """Timestamps, durations and decimal numbers (measured values) replaced by placeholders."""
    return _PERCENT.sub("<n>%", _DECIMAL.sub("<n>", _DURATION.sub("<duration>", _TIME.sub("<time>", md))))


def _check_snapshot(name: str, md: str) -> None:
    path = SNAPSHOTS / f"{name}.md"
    if os.environ.get("SPECDOCTOR_UPDATE_SNAPSHOTS") == "1":
        path.write_text(normalise(md))
    assert path.exists(), f"missing snapshot {path}; run with SPECDOCTOR_UPDATE_SNAPSHOTS=1"
    assert normalise(md) == path.read_text()


def _table_row(md: str, section: str, first_cell: str) -> list[str]:
    body = md.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in {section}")


@pytest.mark.parametrize(("name", "build_fn"), [("seed", seed_report), ("code_regression", code_regression_report)])
def test_markdown_snapshot(name: str, build_fn) -> None:
    _check_snapshot(name, render_markdown(build_fn()))


@pytest.mark.parametrize("build_fn", [seed_report, code_regression_report])
def test_markdown_is_stable_across_noisy_runs(build_fn) -> None:
    a, b = render_markdown(build_fn(seed=1)), render_markdown(build_fn(seed=2))
    assert a != b                                  # the measured values really differ...
    assert normalise(a) == normalise(b)            # ...and nothing else does


def test_seed_values_by_range(seed: Report) -> None:
    md = render_markdown(seed)
    base = _table_row(md, "Claims vs measured", "baseline")
    spec = _table_row(md, "Claims vs measured", "spec")
    assert base[1] == "89.0 tok/s" and spec[1] == "94.0 tok/s"
    assert 80.0 <= float(base[3]) <= 84.0 and 58.0 <= float(spec[3]) <= 62.0
    assert -10.5 <= float(base[5].rstrip("%")) <= -5.5 and -38.5 <= float(spec[5].rstrip("%")) <= -33.5
    assert base[6] == spec[6] == "DIFFERENT"
    assert _table_row(md, "Break-even", "measured τ vs break-even τ\\*")[1].startswith("1.80 vs 2.46 (τ\\* from components")
    first_action = _table_row(md, "Game plan", "1")
    assert first_action[3] == "measured"                    # the report keeps the diagnosis' order
    plan = md.split("## Game plan\n", 1)[1].split("\n## ", 1)[0]
    drafter = [line for line in plan.splitlines() if "drafter" in line]
    assert drafter and "| modelled |" in drafter[0]
    gate = _table_row(md, "Feature gates", "`SGLANG_OEA_K0`")
    assert gate[1] == "0" and gate[4] == "off" and "(unset) in 9 processes" in gate[5]
    assert _table_row(md, "Suspects", "`python/sglang/srt/layers/attention/flashinfer_mla_backend.py`")[2] == "off"
    assert "2. WARN - could not find class definition" in md
    assert "restore: verified; tree hash before `3f2a9c1e`, after `3f2a9c1e`" in md


def test_sections_in_stable_order_and_all_present(seed: Report) -> None:
    md = render_markdown(seed)
    titles = re.findall(r"^## (.+)$", md, flags=re.M)
    assert titles == [s.title for s in build(seed).sections]
    assert [s.id for s in build(seed).sections] == SECTION_IDS
    for section in titles:
        body = md.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
        assert "Not run in this investigation." not in body, f"seed report lacks {section}"


def test_llm_passages_marked(code_regression: Report) -> None:
    md = render_markdown(code_regression)
    # summary, a finding, a decision, an action (in the game plan and among the top actions), the footnote
    assert md.count("[LLM-made]") == 6
    assert "*[LLM-made]* The local communicator.py patch" in md
    assert "gpt-4.1-mini" in md


def test_secrets_never_rendered(seed: Report) -> None:
    seed.findings[0].detail = "token was ghp_abcdefghijklmnopqrstuvwx and url https://u:hunter2pass@h/x"
    md = render_markdown(seed)
    for secret in ("hf_abcdefghijklmnop", "ghp_abcdefghijklmnopqrstuvwx", "hunter2pass"):
        assert secret not in md


def test_markdown_escapes_table_breakers(seed: Report) -> None:
    seed.suspects[0].reason = "a | b\nc"
    row = [line for line in render_markdown(seed).splitlines() if "flashinfer_mla_backend.py` |" in line][0]
    assert "a \\| b<br>c" in row and row.count(" | ") == 5
