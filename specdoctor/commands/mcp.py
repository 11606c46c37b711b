"""`specdoctor mcp --host HOST`: serve the typed tools to any MCP client over stdio (logs go to stderr)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp(
        host: Annotated[str, typer.Option("--host", help="user@host[:port], ssh://..., local or sim:NAME.")],
        allow_mutations: Annotated[bool, typer.Option(
            "--allow-mutations", help="Also expose mutate/disrupt tools (backed up and restored on exit).")] = False,
        accept_new_host_key: Annotated[bool, typer.Option(
            "--accept-new-host-key", help="Trust an SSH host key not yet in known_hosts.")] = False,
        audit: Annotated[Path | None, typer.Option("--audit", help="Append every host command to this JSONL.")] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also log each tool call to stderr.")] = False,
    ) -> None:
        """Serve specdoctor's tools over MCP (stdio) for Claude Desktop, Cursor or any MCP client.

        stdout carries only the protocol. Read-only tools always; mutating ones only with --allow-mutations.
        """
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="specdoctor-mcp %(levelname)s %(message)s")
        logging.getLogger("specdoctor").setLevel(logging.DEBUG if verbose else logging.INFO)
        from specdoctor.embed.mcp_server import run_mcp

        run_mcp(host, allow_mutations=allow_mutations, accept_new_host_key=accept_new_host_key, audit=audit)
