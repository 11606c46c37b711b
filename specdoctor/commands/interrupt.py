"""Ctrl-C during a run: what the terminal is told while the clean-up runs and after it, and `resume`'s preamble.

The engine does the clean-up (trial servers stopped, tree restored and verified, the user's server restarted and
checked) and writes the partial report; this module only words it: the run id, the step it stopped at, what the
clean-up did, where the partial report is, and the exact `specdoctor resume RUN`.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["InterruptReported", "interrupted_lines", "resume_preamble", "sigint_during_cleanup"]


class InterruptReported(SystemExit):
    """Exit 130 after the interruption was reported in full (the entry point adds nothing)."""

    def __init__(self) -> None:
        super().__init__(130)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def sigint_during_cleanup(say: Callable[[str], None] = _say) -> Iterator[None]:
    """First Ctrl-C: say what happens now and stop the run (KeyboardInterrupt). Second, while the clean-up runs:
    say it is still putting the box back, and keep going. Third: give up the clean-up (the user insists)."""
    count = 0

    def handler(signum: int, frame: Any) -> None:
        nonlocal count
        count += 1
        if count == 1:
            say("specdoctor: Ctrl-C: stopping the run; cleaning up — trial servers stopped, the tree put back "
                "and verified, your server restarted if this run stopped it (Ctrl-C twice more abandons this)")
            raise KeyboardInterrupt
        if count == 2:
            say("specdoctor: still cleaning up (your server's restart and the tree's restore); Ctrl-C once more "
                "abandons it — then run `specdoctor restore` to finish it")
            return
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (embedded use): Python's own handling applies
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stopped_at(view: Any) -> str:
    """'at step 12 of 25 (subtract: Stash everything, ...)' from the live view's rows, or ''."""
    steps = list(getattr(view, "steps", {}).values())
    for i, row in enumerate(steps, 1):
        if row.status == "running":
            return f" at step {i} of {len(steps)} ({row.step_id}: {row.title})"
    return ""


def interrupted_lines(outcome: Any, view: Any = None) -> list[str]:
    """The terminal's account of an interrupted run, read from the partial report the engine wrote."""
    from specdoctor.report.box_line import box_left
    from specdoctor.report.writer import load_report

    lines = [f"specdoctor: run {outcome.run_id} interrupted{_stopped_at(view)}"]
    try:
        report = load_report(outcome.out_dir)
    except Exception as exc:  # the report is the evidence; say so if it cannot be read, never hide the rest
        lines.append(f"clean-up: not known (the partial report could not be read: {exc})")
    else:
        for d in report.decisions:
            if d.step == "cleanup" and d.tool in ("stop_server", "restore_worktree"):
                lines.append(f"clean-up: {d.decided or d.found}" + (f" ({d.found})" if d.decided and d.found else ""))
        lines.append(f"clean-up: {box_left(report).text}")
    md = outcome.files.get("md") if getattr(outcome, "files", None) else None
    lines.append(f"partial report: {md or outcome.out_dir}")
    lines.append(f"continue with: specdoctor resume {outcome.run_id}")
    return lines


def resume_preamble(run_id: str, yes: bool | None) -> tuple[list[str], bool]:
    """Where `resume` picks up, and whether it must ask before it stops the user's server again.

    Returns (lines to print, ask): `ask` is True when resuming would stop a server that the interruption's
    clean-up restarted and no consent covers it (`--ask`, or a run that was started without `--yes`).
    """
    from specdoctor.engine.graph import compile_playbook
    from specdoctor.engine.playbook_check import load_playbook
    from specdoctor.engine.runs import load_record, open_checkpointer

    rec = load_record(run_id)
    playbook = load_playbook(rec.playbook)
    with open_checkpointer(rec.checkpoint or None) as saver:
        snap = compile_playbook(playbook, checkpointer=saver).get_state({"configurable": {"thread_id": run_id}})
    values = snap.values or {}
    done = list(values.get("done") or [])
    ids = [s.id for s in playbook.steps]
    nxt = [n for n in (snap.next or ()) if n in ids]
    titles = {s.id: s.title or s.id for s in playbook.steps}
    lines = []
    if nxt:
        i = ids.index(nxt[0]) + 1
        lines.append(f"resuming run {run_id} at step {i} of {len(ids)} ({nxt[0]}: {titles[nxt[0]]}); "
                     f"{len(done)} step{'s' if len(done) != 1 else ''} done before the interruption are kept")
    server = ((values.get("facts") or {}).get("user_server") or {})
    if not server.get("stopped") or "give_back" in done:
        return lines, False
    port = f":{server['port']}" if server.get("port") else ""
    lines.append(f"your server {port} was restarted by the interruption's clean-up; the remaining launches need "
                 "its GPUs, so resuming stops it again (benchmarked first, restarted exactly as it was at the end)")
    if yes:
        lines.append("consent: --yes given now")
        return lines, False
    if yes is None and rec.yes:
        lines.append("consent: the --yes this run was started with carries over — it was given for this run's "
                     "trial launches, which are not done yet, and the server is stopped only if it is the same "
                     "process (argv/env identity) it was; pass --ask to be asked instead")
        return lines, False
    return lines, True
