"""`specdoctor mcp --host HOST`: serve the typed tools to any MCP client over stdio (logs go to stderr)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from specdoctor.commands.hostopts import AcceptNewHostKey, Identity, KnownHosts

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp(
        ctx: typer.Context,
        host: Annotated[str, typer.Option("--host", help="user@host[:port], ssh://..., local or sim:NAME.")],
        allow_mutations: Annotated[bool, typer.Option(
            "--allow-mutations", help="Also expose mutate/disrupt tools (backed up and restored on exit).")] = False,
        accept_new_host_key: AcceptNewHostKey = False,
        known_hosts: KnownHosts = None,
        identity: Identity = None,
        audit: Annotated[Path | None, typer.Option("--audit", help="Append every host command to this JSONL.")] = None,
    ) -> None:
        """Serve specdoctor's tools over MCP (stdio) for Claude Desktop, Cursor or any MCP client.

        stdout carries only the protocol; logs go to stderr (info by default, -v adds each tool call, -q errors
        only). Read-only tools always; mutating ones only with --allow-mutations.
        """
        from specdoctor.commands.verbosity import configure_logging, level_for

        v = ctx.meta.get("specdoctor.verbosity", {})
        configure_logging(level_for(2 if v.get("verbose") else 0, bool(v.get("quiet")), default=logging.INFO),
                          fmt="specdoctor-mcp %(levelname)s %(message)s")
        from specdoctor.embed.mcp_server import run_mcp

        run_mcp(host, allow_mutations=allow_mutations, accept_new_host_key=accept_new_host_key, audit=audit,
                known_hosts=known_hosts, identity_files=identity or None)
