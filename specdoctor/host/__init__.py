"""The Host layer: one protocol, SSH / local / simulated / mock implementations, and the factory."""

from __future__ import annotations

from pathlib import Path

from specdoctor.host.audit import AuditEntry, AuditLog
from specdoctor.host.base import Host, HostHints, Raw, Result, quote_command
from specdoctor.host.local import LocalHost
from specdoctor.host.mock import MockHost
from specdoctor.host.spec import HostSpec, parse_host_spec

__all__ = [
    "AuditEntry",
    "AuditLog",
    "Host",
    "HostHints",
    "HostSpec",
    "LocalHost",
    "MockHost",
    "Raw",
    "Result",
    "open_host",
    "parse_host_spec",
    "quote_command",
]


def open_host(
    spec: str,
    *,
    audit: AuditLog | None = None,
    accept_new_host_key: bool = False,
    known_hosts: str | Path | None = None,
    identity_files: list[str] | None = None,
    ssh_config: str | Path | None = None,
) -> Host:
    """Open a host from a spec string. The only place that knows `sim:` exists."""
    parsed = parse_host_spec(spec)
    if parsed.kind == "local":
        return LocalHost(audit=audit)
    if parsed.kind == "sim":
        from specdoctor.sim import open_sim_host  # type: ignore[attr-defined,unused-ignore]  # lazy: optional

        assert parsed.scenario is not None
        return open_sim_host(parsed.scenario, audit=audit)
    from specdoctor.host.ssh import SSHHost

    assert parsed.host is not None
    return SSHHost(
        parsed.host,
        user=parsed.user,
        port=parsed.port,
        audit=audit,
        accept_new_host_key=accept_new_host_key,
        known_hosts=known_hosts,
        identity_files=identity_files,
        ssh_config=ssh_config,
    )
