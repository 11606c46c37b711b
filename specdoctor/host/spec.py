"""Host spec strings: `user@host[:port]`, `ssh://user@host:port`, `local`, `sim:NAME`, `sim:path.yaml`."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from specdoctor.errors import UsageError

__all__ = ["HostSpec", "parse_host_spec"]

_HOSTNAME = re.compile(r"^[A-Za-z0-9._-]+$")
_BRACKETED = re.compile(r"^\[(?P<host>[^\]]*)\](?::(?P<port>.*))?$")  # [v6addr] or [v6addr]:port
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
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{self.user + '@' if self.user else ''}{host}{':' + str(self.port) if self.port else ''}"


def parse_host_spec(spec: str) -> HostSpec:
    """Parse a host spec or raise UsageError with a one-line explanation."""
    spec = (spec or "").strip()
    if not spec:
        raise UsageError("empty host spec (use user@host[:port], ssh://user@host:port, local or sim:NAME)")
    if spec == "local":
        return HostSpec(kind="local")
    if spec.startswith("sim:"):
        return _sim_spec(spec)
    _check_brackets(spec)
    if spec.startswith("ssh://"):
        return _ssh_url_spec(spec)
    return _user_at_host_spec(spec)


def _sim_spec(spec: str) -> HostSpec:
    name = spec[4:]
    if not name:
        raise UsageError("sim: needs a scenario name or a path to a scenario YAML (e.g. sim:seed)")
    return HostSpec(kind="sim", scenario=name)


def _check_brackets(spec: str) -> None:
    """Brackets (an IPv6 host) come in '[...]' pairs."""
    if spec.count("[") != spec.count("]") or spec.find("]") < spec.find("["):
        shown = "the ssh URL" if "://" in spec else repr(spec)  # a URL is not echoed: it may hold a password
        raise UsageError(f"unbalanced brackets in {shown}: write an IPv6 host as user@[v6addr]:port")


def _ssh_url_spec(spec: str) -> HostSpec:
    """`ssh://user@host:port`: user, host and port only."""
    try:
        parts = urlsplit(spec)
    except ValueError as exc:  # e.g. an IPv6 address urllib cannot read
        raise UsageError(f"invalid ssh URL: {exc}") from None
    if not parts.hostname:
        raise UsageError(f"invalid ssh URL: {spec!r}")
    if parts.password is not None or parts.path not in ("", "/") or parts.query or parts.fragment:
        # the spec is not echoed: it may hold a password
        raise UsageError(f"ssh URL for {parts.hostname} may only hold user, host and port (no password or path)")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"invalid port in {spec!r}") from None
    return _checked(HostSpec(kind="ssh", host=parts.hostname, user=parts.username, port=port), spec)


def _user_at_host_spec(spec: str) -> HostSpec:
    """`[user@]host[:port]`, the host an IPv6 address in brackets or a name/IPv4 address."""
    user, at, rest = spec.rpartition("@")
    if at and not user:
        raise UsageError(f"empty user name in {spec!r}")
    host, port = _host_and_port(rest, spec)
    return _checked(HostSpec(kind="ssh", host=host, user=user or None, port=port), spec)


def _host_and_port(rest: str, spec: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `[v6addr]` or `[v6addr]:port` (a bare IPv6 address, with several ':', has no port)."""
    bracketed = _BRACKETED.match(rest)
    if bracketed:
        host, port_s = bracketed["host"], bracketed["port"]
        if not _is_ipv6(host):
            raise UsageError(f"only IPv6 addresses go in brackets: {spec!r}")
        if port_s is not None and not port_s.isdigit():
            raise UsageError(f"invalid port in {spec!r}")
        return host, int(port_s) if port_s is not None else None
    if rest.count(":") == 1:
        host, _, port_s = rest.partition(":")
        if not port_s.isdigit():
            raise UsageError(f"invalid port in {spec!r}")
        return host, int(port_s)
    return rest, None


def _checked(s: HostSpec, raw: str) -> HostSpec:
    if not s.host or not (_HOSTNAME.match(s.host) or _is_ipv6(s.host)):
        raise UsageError(f"invalid host name in {raw!r}")
    if s.user is not None and not _USER.match(s.user):
        raise UsageError(f"invalid user name in {raw!r}")
    if s.port is not None and not (0 < s.port < 65536):
        raise UsageError(f"port out of range in {raw!r}")
    return s


def _is_ipv6(host: str) -> bool:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return True
