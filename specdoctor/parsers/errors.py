"""ParseError: the one exception a parser may raise on input it cannot read (a ValueError, one line)."""

from __future__ import annotations

__all__ = ["ParseError"]


class ParseError(ValueError):
    """Text that is not the format a parser reads; `str(err)` is a one-line reason with a short excerpt."""
