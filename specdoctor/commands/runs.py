"""`specdoctor runs`: list the runs recorded on this controller."""

from __future__ import annotations

import time
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def runs(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
        """List runs (id, host, playbook, status, verdict) so one can be resumed or reviewed."""
        from rich.console import Console
        from rich.table import Table

        from specdoctor.engine.runs import list_records

        recs = list_records()
        if as_json:
            typer.echo("[" + ",".join(r.model_dump_json() for r in recs) + "]")
            return
        table = Table("run", "started", "host", "playbook", "status", "verdict", "out")
        for r in recs:
            table.add_row(r.run_id, time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started)), r.host, r.playbook,
                          r.status, r.verdict or "", r.out_dir)
        Console().print(table)
