"""The live view: plain lines when not a TTY, a rich display on a TTY, approvals, and the summary panel."""

from __future__ import annotations

import io

from rich.console import Console

from specdoctor.report.live import LiveView
from specdoctor.report.model import Report

PLAN = [("measure", "Reproduce the baseline", "benchmark", "read"), ("stash", "Stash all patches", "stash_all", "mutate")]


def _drive(view: LiveView, report: Report, answer_ok: bool) -> bool:
    view.start(PLAN)
    view.step_started("measure")
    for i in range(1, 4):
        view.progress("benchmark run", done=i, total=3)
    view.step_finished("measure", "ok", "baseline 82.1 tok/s [5 runs]")
    ok = view.ask_approval("git -C /root/sglang stash push\nHF_TOKEN=hf_abcdefghijklmnop")
    view.step_started("stash")
    view.step_finished("stash", "ok" if answer_ok else "declined", "stashed" if answer_ok else "not approved")
    view.finish(report)
    return ok


def test_plain_output_when_not_a_tty(seed: Report) -> None:
    buf = io.StringIO()
    view = LiveView(console=Console(file=buf, width=200), input_fn=lambda prompt: "n")
    assert view.plain                                           # a StringIO is not a terminal
    assert _drive(view, seed, answer_ok=False) is False
    out = buf.getvalue()
    lines = out.splitlines()
    assert lines[0] == "plan: 2 steps"
    assert "  2. stash: Stash all patches (stash_all, mutate)" in lines
    assert "  … benchmark run (2/3)" in lines
    assert any(line.startswith("✓ measure [ok] baseline 82.1 tok/s [5 runs]") for line in lines)
    assert "  git -C /root/sglang stash push" in lines and "declined" in lines
    assert "hf_abcdefghijklmnop" not in out
    assert "verdict: baseline-not-reproducible (confidence high)" in lines
    assert "\x1b[" not in out                                   # no escape codes in plain mode
    assert any("drafter" in line for line in lines[lines.index("verdict: baseline-not-reproducible (confidence high)"):])


def test_rich_live_on_a_tty(seed: Report) -> None:
    buf = io.StringIO()
    view = LiveView(console=Console(file=buf, force_terminal=True, width=120), input_fn=lambda prompt: "yes")
    assert not view.plain
    assert _drive(view, seed, answer_ok=True) is True
    out = buf.getvalue()
    assert "approval needed" in out and "stash push" in out and "hf_abcdefghijklmnop" not in out
    assert "Reproduce the baseline" in out and "✓" in out
    assert "Next actions:" in out and "baseline-not-reproducible" in out
    assert view._live is not None and not view._live.is_started      # stopped at finish


def test_end_of_input_declines_and_unknown_steps_show(seed: Report) -> None:
    def eof(prompt: str) -> str:
        raise EOFError

    buf = io.StringIO()
    view = LiveView(plain=True, console=Console(file=buf), input_fn=eof)
    view.start(PLAN)
    assert view.ask_approval("rm nothing") is False
    view.step_started("retry-1")
    view.step_finished("retry-1", "error", "boom")
    assert "✗ retry-1 [error] boom" in buf.getvalue()
