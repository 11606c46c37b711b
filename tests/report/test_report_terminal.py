"""`report show` in a terminal: at most 100 columns, wide tables as records, long output through a pager."""

from __future__ import annotations

import io

from rich.console import Console
from rich.pager import Pager

from specdoctor.report.show import MAX_WIDTH, print_report

from .report_builders import code_regression_report, seed_report


class _Recorder(Pager):
    def __init__(self) -> None:
        self.shown: list[str] = []

    def show(self, content: str) -> None:
        self.shown.append(content)


def _render(width: int, terminal: bool, height: int = 50, pager: Pager | None = None) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=width, height=height, force_terminal=terminal, color_system=None)
    print_report(seed_report(), console=con, pager=pager)
    return buf.getvalue()


def test_fits_100_columns_even_on_a_wide_terminal() -> None:
    out = _render(200, terminal=False)
    widths = [len(line) for line in out.splitlines()]
    assert max(widths) <= MAX_WIDTH, max(widths)
    assert "Decisions log" in out and "SGLANG_OEA_K0" in out
    assert max(widths) > 80           # it does use the width it has
    narrow = _render(60, terminal=False)
    assert max(len(line) for line in narrow.splitlines()) <= 60


def test_long_output_goes_through_the_pager_on_a_terminal() -> None:
    rec = _Recorder()
    out = _render(120, terminal=True, height=40, pager=rec)
    assert len(rec.shown) == 1 and "Decisions log" in rec.shown[0] and out == ""
    rec2 = _Recorder()
    _render(120, terminal=True, height=100000, pager=rec2)      # fits the screen: printed, no pager
    assert rec2.shown == []


def test_wide_tables_read_as_records() -> None:
    buf = io.StringIO()
    print_report(code_regression_report(), sections=["decisions"],
                 console=Console(file=buf, width=100, force_terminal=False))
    out = buf.getvalue()
    assert "step bisect" in out and "  found: communicator.py" in out
