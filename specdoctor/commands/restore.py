"""`specdoctor restore --host H --repo R [--backup ID] [--list]`: list and restore worktree backups left on a host."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from specdoctor.commands.hostopts import AcceptNewHostKey, Identity, KnownHosts
from specdoctor.errors import UsageError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("restore")
    def restore_cmd(
        host: Annotated[str, typer.Option(help="user@host[:port], local or sim:NAME.")],
        repo: Annotated[str, typer.Option(help="The git checkout on the host.")],
        backup: Annotated[str | None, typer.Option(help="Backup id (default: the newest not yet restored).")] = None,
        list_only: Annotated[bool, typer.Option("--list", help="Only list the backups.")] = False,
        force_head: Annotated[bool, typer.Option(help="Also move HEAD back if it moved.")] = False,
        accept_new_host_key: AcceptNewHostKey = False,
        known_hosts: KnownHosts = None,
        identity: Identity = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    ) -> None:
        """Put a checkout back exactly as specdoctor found it (works after the controller died)."""
        from specdoctor.engine.runs import new_run_id
        from specdoctor.host import open_host
        from specdoctor.toolkit import ToolContext
        from specdoctor.tools.checkout.checkout_lock import checkout_lock

        with open_host(host, accept_new_host_key=accept_new_host_key, known_hosts=known_hosts,
                       identity_files=identity or None) as h:
            ctx = ToolContext(host=h, run_id="restore", auto_approve=True)
            # One run per checkout: a live run is never restored under its feet; a dead one's lock is taken over.
            if list_only:  # only reads
                _restore(ctx, repo, backup, list_only, force_head, as_json)
                return
            with checkout_lock(ctx, repo, f"restore-{new_run_id()}"):
                from specdoctor.engine.actions.user_server import bring_back_pending

                servers = bring_back_pending(ctx)  # a crashed run's stopped server comes back first
                for line in servers:
                    typer.echo(line)
                _restore(ctx, repo, backup, list_only, force_head, as_json, servers_back=bool(servers))


def _restore(ctx: Any, repo: str, backup: str | None, list_only: bool, force_head: bool, as_json: bool,
             servers_back: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    from specdoctor.tools.checkout.worktree import list_backups, restore

    backups = list_backups(ctx, repo)
    if list_only:
        if as_json:
            typer.echo(json.dumps([b.model_dump() for b in backups], indent=2))
            return
        table = Table("backup", "created", "branch", "head", "changed", "stashes", "restored")
        for b in backups:
            table.add_row(b.backup_id, b.created, b.branch or "(detached)", b.head[:10], str(b.changed),
                          str(b.stashes), "yes" if b.restored else "no")
        Console().print(table)
        return
    if backup is None:
        pending = [b for b in backups if not b.restored]
        if not pending and servers_back:
            return
        if not pending:
            raise UsageError(f"no unrestored backup in {repo}; name one with --backup (see --list)")
        backup = pending[0].backup_id
    result = restore(ctx, repo, backup, force_head=force_head)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        typer.echo(result.summary_line())
        for action in result.actions:
            typer.echo(f"  {action}")
        if result.safety_ref:
            typer.echo(f"  the state before this restore is kept at {result.safety_ref}")
