"""report.html in a real Chromium (Playwright, system browser) at 1280 and 390 px: fits, answers first, plots, links."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdoctor.report import write_report
from specdoctor.report.model import Report

from .browser import check_page
from .report_builders import code_regression_report, seed_report


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Report, list]]:
    out = {}
    for name, build in (("seed", seed_report), ("code_regression", code_regression_report)):
        report = build()
        paths = write_report(report, tmp_path_factory.mktemp(name))
        out[name] = (report, check_page(paths["html"]))
    return out


@pytest.mark.parametrize("name", ["seed", "code_regression"])
def test_no_element_wider_than_the_viewport(pages, name: str) -> None:
    for check in pages[name][1]:
        for state in (check.overflow, check.overflow_open):
            assert state["scrollWidth"] <= check.width, (check.width, state)
            assert state["nbad"] == 0, (check.width, state["bad"])


@pytest.mark.parametrize("name", ["seed", "code_regression"])
def test_verdict_visible_without_scrolling(pages, name: str) -> None:
    for check in pages[name][1]:
        box = check.verdict_box
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= check.viewport_height, box


@pytest.mark.parametrize("name", ["seed", "code_regression"])
def test_every_plot_has_data(pages, name: str) -> None:
    for check in pages[name][1]:
        assert check.no_data == []
        ids = {p["id"] for p in check.plots}
        assert {"plot-waterfall", "plot-throughput"} <= ids
        assert all(p["complete"] and p["w"] > 300 and p["h"] > 150 for p in check.plots), check.plots
    ids = {p["id"] for p in pages["seed"][1][0].plots}
    assert {"plot-nccl", "plot-breakeven"} <= ids
    assert "plot-bisection" in {p["id"] for p in pages["code_regression"][1][0].plots}


@pytest.mark.parametrize("name", ["seed", "code_regression"])
def test_every_evidence_link_opens_its_commands(pages, name: str) -> None:
    for check in pages[name][1]:
        assert len(check.evidence) >= 3
        assert check.clicked and all(check.clicked)
        for ev in check.evidence:
            assert ev["open"], ev
            n = int(ev["label"].split()[0])                   # "3 commands"
            assert ev["commands"] == n and n > 0, ev


def test_the_check_catches_overflow_and_missing_plots(tmp_path: Path) -> None:
    """The detector must be able to fail: a too-wide table and a plot without data are both reported."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p class="verdict">x</p><table style="width:2000px"><tr><td>wide'
                   '</td></tr></table><em>Break-even: no data.</em><figure id="plot-x"><img alt="x" src="data:,">'
                   '</figure></body></html>')
    (check,) = check_page(bad, widths=(390,))
    assert check.overflow["nbad"] > 0 and check.overflow["scrollWidth"] > 390
    assert check.no_data and check.plots[0]["w"] == 0
