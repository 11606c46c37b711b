"""Number, time and value formatting shared by every renderer, so all formats read the same."""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["num", "pct", "pval", "when", "seconds", "value", "yesno", "size", "samples"]

DASH = "—"


def num(x: float | int | None, digits: int = 1, unit: str = "") -> str:
    """A number with fixed decimals and an optional unit; '—' when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    text = f"{x:.{digits}f}" if isinstance(x, float) else str(x)
    return f"{text} {unit}".rstrip()


def pct(x: float | None, digits: int = 1) -> str:
    """A signed percentage: '+3.2%' / '-36.1%'."""
    if x is None:
        return DASH
    return f"{x:+.{digits}f}%"


def pval(p: float | None) -> str:
    """p-values: three significant digits, '<0.001' below that."""
    if p is None:
        return DASH
    return "<0.001" if p < 0.001 else f"{p:.3g}"


def when(t: float | None) -> str:
    """Unix time as an ISO-8601 UTC timestamp (seconds)."""
    if t is None:
        return DASH
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds(s: float | None) -> str:
    """A duration: milliseconds below a second, else seconds with two decimals."""
    if s is None:
        return DASH
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.2f} s"
    m, rest = divmod(round(s), 60)
    return f"{m} min {rest:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def value(v: object) -> str:
    """An environment/config value as a cell: unset shows as '(unset)'."""
    if v is None:
        return "(unset)"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def yesno(b: bool | None, yes: str = "yes", no: str = "no") -> str:
    """A tri-state boolean as a word."""
    return DASH if b is None else yes if b else no


def size(n: int) -> str:
    """Bytes in binary units: 8 KiB, 1 MiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            q = n / scale
            return f"{q:.0f} {unit}" if q == int(q) else f"{q:.1f} {unit}"
    return f"{n} B"


def samples(xs: list[float], digits: int = 1, limit: int = 12) -> str:
    """A short list of samples; long lists are elided with a count."""
    if not xs:
        return DASH
    shown = ", ".join(f"{x:.{digits}f}" for x in xs[:limit])
    return shown + (f", … ({len(xs)} in all)" if len(xs) > limit else "")
