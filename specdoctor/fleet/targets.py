"""The fleet's host list: `--hosts FILE` (one host a line: `[NAME] SPEC [port=N]`, `#` comments) or `h1,h2,…`."""

from __future__ import annotations

import re
from pathlib import Path

from specdoctor.errors import UsageError
from specdoctor.fleet.models import SurveyTarget
from specdoctor.host.spec import parse_host_spec

__all__ = ["parse_hosts", "parse_host_line"]

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def parse_host_line(line: str, where: str) -> SurveyTarget:
    """`[NAME] SPEC [port=N]` → a target; the spec is checked as `--host` checks it."""
    words = line.split()
    port: int | None = None
    rest = []
    for w in words:
        if w.startswith("port="):
            if not w[5:].isdigit() or not 0 < int(w[5:]) < 65536:
                raise UsageError(f"{where}: port= takes a TCP port, got {w[5:]!r}")
            port = int(w[5:])
        else:
            rest.append(w)
    if len(rest) not in (1, 2):
        raise UsageError(f"{where}: expected '[NAME] SPEC [port=N]', got {line.strip()!r}")
    spec = rest[-1]
    name = rest[0] if len(rest) == 2 else spec
    if not _NAME.match(name) and len(rest) == 2:
        raise UsageError(f"{where}: host name {name!r} may hold letters, digits, '.', '_' and '-' only")
    parse_host_spec(spec)
    return SurveyTarget(name=name, spec=spec, port=port)


def parse_hosts(value: str) -> list[SurveyTarget]:
    """A hosts file (when `value` is a file) or a comma-separated list of host specs; names must be unique."""
    path = Path(value).expanduser()
    if path.is_file():
        targets = []
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            text = line.split("#", 1)[0].strip()
            if text:
                targets.append(parse_host_line(text, f"{path}:{i}"))
    elif "/" in value and "," not in value:
        raise UsageError(f"--hosts: no such file {value!r}")
    else:
        targets = [parse_host_line(item.strip(), "--hosts") for item in value.split(",") if item.strip()]
    if not targets:
        raise UsageError("--hosts names no host")
    names = [t.name for t in targets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"--hosts lists {', '.join(dup)} more than once")
    return targets
