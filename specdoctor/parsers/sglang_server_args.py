"""`server_args=ServerArgs(...)` from an SGLang server log: every resolved flag, read without importing SGLang."""

from __future__ import annotations

import ast
import re
from typing import Any

from pydantic import BaseModel, Field

from specdoctor.parsers.errors import ParseError
from specdoctor.parsers.text import clean_lines

__all__ = ["ServerArgsDump", "parse_server_args"]


class ServerArgsDump(BaseModel):
    """The resolved arguments as the server printed them, by dest name, plus what could not be read."""

    args: dict[str, Any] = Field(default_factory=dict, description="dest -> Python value (literal_eval of the repr).")
    non_literal: dict[str, str] = Field(default_factory=dict,
                                        description="dest -> repr text for values that are not literals.")
    truncated: bool = Field(default=False, description="The repr ended before its closing parenthesis.")
    time: str | None = Field(default=None, description="The log line's timestamp, when it has one.")

    def get(self, name: str, default: Any = None) -> Any:
        return self.args.get(name, default)

    @property
    def speculative(self) -> bool:
        alg = self.args.get("speculative_algorithm")
        return bool(alg) and str(alg).upper() != "NONE"


_OPEN = {"(": ")", "[": "]", "{": "}"}


def _pairs(body: str) -> tuple[list[tuple[str, str]], bool]:
    """Top-level `key=value` pairs of a call's argument text, and whether the closing ')' was reached."""
    pairs: list[tuple[str, str]] = []
    stack: list[str] = []
    quote: str | None = None
    start = 0
    i = 0
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if body.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ch in "'\"":
            quote = body[i:i + 3] if body[i:i + 3] in ("'''", '"""') else ch
            i += len(quote)
            continue
        elif ch in _OPEN:
            stack.append(_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif not stack and ch in ",)":
            pairs.append(_split(body[start:i]))
            if ch == ")":
                return [p for p in pairs if p[0]], True
            start = i + 1
        i += 1
    tail = _split(body[start:])
    if tail[0] and tail[1]:
        pairs.append((tail[0], tail[1] + "\x00"))  # marks a value the text cut off
    return [p for p in pairs if p[0]], False


def _split(item: str) -> tuple[str, str]:
    key, eq, value = item.partition("=")
    key = key.strip()
    if not eq or not re.fullmatch(r"[A-Za-z_]\w*", key):
        return "", ""
    return key, value.strip()


def parse_server_args(text: str) -> ServerArgsDump:
    """The first `ServerArgs(...)` repr in a log (any version, one line or wrapped); ParseError when absent."""
    lines = clean_lines(text)
    joined = "\n".join(lines)
    at = joined.find("ServerArgs(")
    if at < 0:
        raise ParseError("no 'ServerArgs(' in the text")
    line_start = joined.rfind("\n", 0, at) + 1
    ts = re.search(r"\[(\d{4}-\d\d-\d\d[ T][\d:.]+)", joined[line_start:at])
    pairs, closed = _pairs(joined[at + len("ServerArgs("):])
    dump = ServerArgsDump(truncated=not closed, time=ts.group(1) if ts else None)
    for key, raw in pairs:
        if raw.endswith("\x00"):
            dump.non_literal[key] = raw[:-1]
            continue
        try:
            dump.args[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            dump.non_literal[key] = raw
    if not dump.args and not dump.non_literal:
        raise ParseError(f"'ServerArgs(' without arguments: {joined[at:at + 80]!r}")
    return dump
