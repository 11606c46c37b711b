"""`specdoctor resume RUN_ID`: continue a run after a crash, SIGINT or a dropped connection."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def resume(
        run_id: Annotated[str, typer.Argument(help="Run id (see `specdoctor runs`).")],
        yes: Annotated[bool | None, typer.Option("--yes/--ask", help="Approve mutating steps (default: as started).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    ) -> None:
        """Stop what the run started, restore the tree, and finish the remaining steps."""
        import sys

        from specdoctor.commands.investigate import approver_for, make_view, show_outcome
        from specdoctor.engine.runner import resume as do_resume

        view = make_view(plain=as_json or not sys.stdout.isatty())
        outcome = do_resume(run_id, view=view, approver=approver_for(view), yes=yes)
        show_outcome(view, outcome, as_json)
