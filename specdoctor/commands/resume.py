"""`specdoctor resume RUN_ID`: continue a run after a crash, SIGINT or a dropped connection."""

from __future__ import annotations

from typing import Annotated

import typer

from specdoctor.commands.hostopts import AcceptNewHostKey, Identity, KnownHosts


def register(app: typer.Typer) -> None:
    @app.command()
    def resume(
        run_id: Annotated[str, typer.Argument(help="Run id (see `specdoctor runs`).")],
        yes: Annotated[bool | None, typer.Option("--yes/--ask", help="Approve mutating steps (default: as started).")] = None,
        accept_new_host_key: AcceptNewHostKey = False,
        known_hosts: KnownHosts = None,
        identity: Identity = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    ) -> None:
        """Stop what the run started, restore the tree, and finish the remaining steps.

        The host is reopened with the run's own SSH options; -i, --known-hosts and --accept-new-host-key
        given here replace them (e.g. the key moved since the run started).
        """
        import sys

        from specdoctor.commands.interrupt import resume_preamble
        from specdoctor.commands.investigate import (
            approver_for,
            exit_for,
            make_view,
            run_reporting_interrupt,
            show_outcome,
        )
        from specdoctor.commands.runs import resolve_run_id
        from specdoctor.engine.runner import resume as do_resume
        from specdoctor.engine.runs import load_record, save_record

        run_id = resolve_run_id(run_id)
        override = {"identity_files": identity or None, "known_hosts": known_hosts,
                    "accept_new_host_key": accept_new_host_key or None}
        override = {k: v for k, v in override.items() if v is not None}
        if override:  # the runner reopens the host from the record's options
            rec = load_record(run_id)
            rec.host_options = {**rec.host_options, **override}
            save_record(rec)
        view = make_view(plain=as_json or not sys.stdout.isatty())
        lines, ask = resume_preamble(run_id, yes)
        for line in lines:
            typer.echo(line, err=True)
        if ask and not view.ask_approval("Stop your server again for the remaining launches?\n"
                                         "(declined: nothing is resumed; your server keeps running)"):
            typer.echo(f"specdoctor: run {run_id} not resumed; your server keeps running. "
                       f"`specdoctor resume {run_id} --yes` continues it later", err=True)
            raise typer.Exit(0)
        outcome = run_reporting_interrupt(
            lambda: do_resume(run_id, view=view, approver=approver_for(view), yes=yes), view)
        show_outcome(view, outcome, as_json)
        exit_for(outcome)
