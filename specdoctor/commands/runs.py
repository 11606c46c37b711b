"""`specdoctor runs`: list the runs recorded on this controller; run ids resolve from a unique prefix."""

from __future__ import annotations

import time
from typing import Annotated

import typer

__all__ = ["register", "resolve_run_id"]


def resolve_run_id(text: str) -> str:
    """A whole run id, or a prefix of exactly one (a trailing `…` from a cut table cell is ignored)."""
    from specdoctor.engine.runs import list_records
    from specdoctor.errors import UsageError

    want = text.strip().rstrip("…").rstrip(".")
    ids = [r.run_id for r in list_records()]
    if want in ids:
        return want
    hits = [i for i in ids if want and i.startswith(want)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise UsageError(f"run id {text!r} matches {len(hits)} runs ({', '.join(hits[:3])}{', ...' if len(hits) > 3 else ''}): "
                         "give more of it")
    raise UsageError(f"no run {text!r} on this controller (see `specdoctor runs`)")


def register(app: typer.Typer) -> None:
    @app.command()
    def runs(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
        """List runs (id, host, playbook, status, verdict) so one can be resumed or reviewed."""
        from specdoctor.commands.tabular import print_rows
        from specdoctor.engine.runs import list_records

        recs = list_records()
        if as_json:
            typer.echo("[" + ",".join(r.model_dump_json() for r in recs) + "]")
            return
        # The id is what `resume`/`report show` take: never cut; on a terminal the other columns wrap instead.
        print_rows(["run", "started", "host", "playbook", "status", "verdict", "out"],
                   [[r.run_id, time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)), r.host, r.playbook,
                     r.status, r.verdict or "", r.out_dir] for r in recs], no_wrap=["run"])
