"""The SSH options every command that opens a host takes: -i/--identity, --known-hosts, --accept-new-host-key."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["AcceptNewHostKey", "Identity", "KnownHosts"]

Identity = Annotated[list[str] | None, typer.Option(
    "--identity", "-i", help="SSH private key (repeat for several); default: ~/.ssh/config's, the agent's.")]
KnownHosts = Annotated[str | None, typer.Option(
    "--known-hosts", help="known_hosts file (default: ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts).")]
AcceptNewHostKey = Annotated[bool, typer.Option(
    "--accept-new-host-key", help="Trust an SSH host key not yet in known_hosts, and record it.")]
