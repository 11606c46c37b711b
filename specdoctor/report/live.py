"""The live terminal view the engine drives (rich Live on a TTY, plain lines otherwise); the CLI creates it.

It is the only part of the report package that writes to the terminal. Everything goes to stderr so a
command's stdout stays clean for `--json` output.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from specdoctor.host.redact import redact_text
from specdoctor.report import fmt
from specdoctor.report.box_line import plan_vs_actual
from specdoctor.report.live_status import RunClock
from specdoctor.report.model import Report, confidence_label
from specdoctor.report.show import VERDICT_STYLE

__all__ = ["LiveView", "StepRow"]

_ICON = {"pending": "·", "running": "▶", "ok": "✓", "skipped": "-", "dry-run": "~", "declined": "✗",
         "error": "✗", "failed": "✗", "unresolved": "?", "no-data": "∅", "retry": "↻"}
_STYLE = {"ok": "green", "running": "bold cyan", "error": "red", "failed": "red", "declined": "yellow",
          "unresolved": "yellow", "skipped": "dim", "pending": "dim"}


@dataclass
class StepRow:
    """One playbook step as the view tracks it."""

    step_id: str
    title: str
    tool: str
    effect: str
    status: str = "pending"
    summary: str = ""
    started: float | None = None
    seconds: float | None = None


class LiveView:
    """Steps with status, a progress bar for benchmark runs and sweeps, approvals, and a final summary."""

    def __init__(self, plain: bool = False, console: Console | None = None,
                 input_fn: Callable[[str], str] | None = None, clock: Callable[[], float] = time.monotonic):
        self.console = console or Console(stderr=True, highlight=False)
        self.plain = plain or not self.console.is_terminal
        self._input = input_fn or (lambda prompt: self.console.input(prompt))
        self._clock = clock
        self.steps: dict[str, StepRow] = {}
        self._live: Live | None = None
        # elapsed, then the time left as rich estimates it from the runs done (the measurement's expected length)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left"),
                                  TimeRemainingColumn(), console=self.console)
        self.clock = RunClock()
        self._task: TaskID | None = None

    # --- engine callbacks -------------------------------------------------------------------------
    def start(self, plan: list[tuple[str, str, str, str]]) -> None:
        """Show the playbook's steps: (step_id, title, tool, effect)."""
        self.steps = {sid: StepRow(sid, title, tool, effect) for sid, title, tool, effect in plan}
        self.clock.started, self.clock.total_steps = self._clock(), len(plan)
        if self.plain:
            self._line(f"plan: {len(plan)} steps")
            for i, row in enumerate(self.steps.values(), 1):
                self._line(f"  {i}. {row.step_id}: {row.title}" + self._tool_note(row))
            return
        self._live = Live(self, console=self.console, refresh_per_second=8, transient=False)
        self._live.start()

    def step_started(self, step_id: str) -> None:
        row = self._row(step_id)
        row.status, row.started = "running", self._clock()
        ids = list(self.steps)
        self.clock.step(ids.index(step_id) + 1 if step_id in ids else self.clock.step_index, row.title)
        self._reset_progress()
        if self.plain:
            self._line(f"{_ICON['running']} {row.step_id}: {row.title}")
        self._refresh()

    def step_finished(self, step_id: str, status: str, summary: str) -> None:
        row = self._row(step_id)
        row.status, row.summary = status, redact_text(summary or "")
        if row.started is not None:
            row.seconds = self._clock() - row.started
        self.clock.finished(row.tool, status, row.summary, self._clock())
        self._reset_progress()
        if self.plain:
            took = f" ({fmt.seconds(row.seconds)})" if row.seconds is not None else ""
            self._line(f"{_ICON.get(status, '?')} {row.step_id} [{status}] {row.summary}{took}".rstrip())
        self._refresh()

    def progress(self, message: str, done: int | None = None, total: int | None = None) -> None:
        """A benchmark run or sweep point; with done/total a bar is shown."""
        message = redact_text(message)
        self.clock.progress(message, self._clock())
        if self.plain:
            count = f" ({done}/{total})" if done is not None and total else ""
            self._line(f"  … {message}{count}")
            return
        if self._task is None:
            self._task = self._progress.add_task(escape(message), total=total)
        self._progress.update(self._task, description=escape(message), total=total,
                              completed=done if done is not None else 0)
        self._refresh()

    def ask_approval(self, text: str) -> bool:
        """Show exactly what would run and ask; anything but y/yes (or end of input) declines."""
        text = redact_text(text)
        paused = self._live is not None and self._live.is_started
        if paused and self._live is not None:
            self._live.stop()
        try:
            if self.plain:
                self._line("approval needed:")
                for line in text.splitlines():
                    self._line(f"  {line}")
            else:
                self.console.print(Panel(Text(text), title="approval needed", border_style="yellow", expand=False))
            try:
                answer = self._input("Run it? [y/N] ")
            except EOFError:
                answer = ""
            ok = answer.strip().lower() in ("y", "yes")
            if self.plain:
                self._line("approved" if ok else "declined")
            return ok
        finally:
            if paused and self._live is not None:
                self._live.start()

    def finish(self, report: Report) -> None:
        """Stop the live display and show the verdict with the top actions."""
        self.close()
        if report.verdict == "plan-only":
            self._plan_only(report)
            return
        top = report.game_plan[:3]
        if self.plain:
            conf = "" if report.confidence is None else f" (confidence {confidence_label(report.confidence)})"
            self._line(f"verdict: {report.verdict}{conf}")
            if report.summary:
                self._line(redact_text(report.summary))
            for i, a in enumerate(top, 1):
                self._line(f"  {i}. {redact_text(a.title)}{self._gain(a.gain, a.gain_unit, a.basis)}")
            return
        body = Text()
        body.append(report.verdict, style=VERDICT_STYLE.get(report.verdict, "bold"))
        if report.confidence is not None:
            body.append(f"  confidence {confidence_label(report.confidence)} ({report.confidence:.2f})", style="dim")
        if report.summary:
            body.append("\n" + redact_text(report.summary))
        if top:
            body.append("\n\nNext actions:", style="bold")
            for i, a in enumerate(top, 1):
                body.append(f"\n {i}. {redact_text(a.title)}")
                body.append(self._gain(a.gain, a.gain_unit, a.basis), style="green")
        body.append(f"\n\n{len(report.commands)} commands run; {len(report.decisions)} decisions logged.",
                    style="dim")
        self.console.print(Panel(body, title="specdoctor", border_style="cyan"))

    def _plan_only(self, report: Report) -> None:
        """A dry run's ending: the plan's cost and every step not run, with the commands it would run."""
        lines = [f"verdict: {report.verdict}", redact_text(report.summary)]
        cost = plan_vs_actual(report)
        if report.plan is not None:
            lines.append(f"plan: {report.plan.text}")
        elif cost:
            lines.append(f"plan: {cost}")
        for p in report.dry_run:
            lines.append(f"~ {p.step} ({p.target}, {p.effect}){'; ' + p.condition if p.condition else ''}")
            for c in p.commands:
                after = f"   [known after {c.after}]" if not c.known and c.after else ""
                lines.append(f"    $ {redact_text(c.command)}{after}")
        if self.plain:
            for line in lines:
                self._line(line)
            return
        self.console.print(Panel(Text("\n".join(lines)), title="specdoctor: dry run", border_style="cyan"))

    # --- plumbing ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the live display (idempotent); safe on SIGINT paths."""
        if self._live is not None and self._live.is_started:
            self._reset_progress()
            self._live.refresh()
            self._live.stop()

    def __enter__(self) -> LiveView:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __rich__(self) -> RenderableType:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(width=1)
        table.add_column(no_wrap=True)
        table.add_column(style="dim", no_wrap=True)
        table.add_column(ratio=1)
        for row in self.steps.values():
            style = _STYLE.get(row.status, "")
            took = fmt.seconds(row.seconds) if row.seconds is not None else ""
            table.add_row(Text(_ICON.get(row.status, "?"), style=style), Text(row.title or row.step_id, style=style),
                          took, Text(row.summary, overflow="ellipsis", no_wrap=True))
        parts: list[RenderableType] = [Text(self.clock.line(self._clock()), style="bold"), table]
        if self._task is not None:
            parts.append(self._progress)
        return Group(*parts)

    def _row(self, step_id: str) -> StepRow:
        if step_id not in self.steps:   # a step the plan did not list (retries, sub-steps): show it anyway
            self.steps[step_id] = StepRow(step_id, step_id, "", "")
        return self.steps[step_id]

    def _reset_progress(self) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None

    def _refresh(self) -> None:
        if self._live is not None and self._live.is_started:
            self._live.refresh()

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    @staticmethod
    def _tool_note(row: StepRow) -> str:
        bits = [b for b in (row.tool, row.effect) if b]
        return f" ({', '.join(bits)})" if bits else ""

    @staticmethod
    def _gain(gain: float | None, unit: str, basis: str) -> str:
        if gain is None:
            return ""
        g = f"{gain:+.1f} tok/s" if unit == "tok/s" else fmt.pct(gain)
        return f" — {g}, {basis}"
