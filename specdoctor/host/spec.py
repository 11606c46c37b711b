"""Host spec strings: `user@host[:port]`, `ssh://user@host:port`, `local`, `sim:NAME`, `sim:path.yaml`."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from specdoctor.errors import UsageError

__all__ = ["HostSpec", "parse_host_spec"]

_HOSTNAME = re.compile(r"^[A-Za-z0-9._-]+$|^\[[0-9A-Fa-f:.]+\]$")
_USER = re.compile(r"^[A-Za-z0-9._-]+$")


class HostSpec(BaseModel):
    """A parsed host spec."""

    kind: Literal["ssh", "local", "sim"]
    host: str | None = None
    user: str | None = None
    port: int | None = None
    scenario: str | None = None

    def __str__(self) -> str:
        if self.kind == "local":
            return "local"
        if self.kind == "sim":
            return f"sim:{self.scenario}"
        return f"{self.user + '@' if self.user else ''}{self.host}{':' + str(self.port) if self.port else ''}"


def parse_host_spec(spec: str) -> HostSpec:
    """Parse a host spec or raise UsageError with a one-line explanation."""
    spec = (spec or "").strip()
    if not spec:
        raise UsageError("empty host spec (use user@host[:port], ssh://user@host:port, local or sim:NAME)")
    if spec == "local":
        return HostSpec(kind="local")
    if spec.startswith("sim:"):
        name = spec[4:]
        if not name:
            raise UsageError("sim: needs a scenario name or a path to a scenario YAML (e.g. sim:seed)")
        return HostSpec(kind="sim", scenario=name)
    if spec.startswith("ssh://"):
        parts = urlsplit(spec)
        if not parts.hostname:
            raise UsageError(f"invalid ssh URL: {spec!r}")
        try:
            port = parts.port
        except ValueError:
            raise UsageError(f"invalid port in {spec!r}") from None
        return _checked(HostSpec(kind="ssh", host=parts.hostname, user=parts.username, port=port), spec)
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    if rest.count(":") == 1:
        host, _, port_s = rest.partition(":")
        if not port_s.isdigit():
            raise UsageError(f"invalid port in {spec!r}")
        port = int(port_s)
    return _checked(HostSpec(kind="ssh", host=host, user=user or None, port=port), spec)


def _checked(s: HostSpec, raw: str) -> HostSpec:
    if not s.host or not _HOSTNAME.match(s.host):
        raise UsageError(f"invalid host name in {raw!r}")
    if s.user is not None and not _USER.match(s.user):
        raise UsageError(f"invalid user name in {raw!r}")
    if s.port is not None and not (0 < s.port < 65536):
        raise UsageError(f"port out of range in {raw!r}")
    return s
