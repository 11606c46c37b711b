"""One reader for the `echo @@name` sections that specdoctor's one-round-trip host scripts print.

A host script that gathers several facts in one command prints a marker line `@@name` (an identifier, alone on
its line) before each part. Nine places used to carry their own copy of this loop (or a `partition("@@x")`),
each with slightly different rules; one parser keeps the rule in one place.
"""

from __future__ import annotations

import re

__all__ = ["MARKER", "split_sections"]

MARKER = re.compile(r"@@([A-Za-z_][A-Za-z0-9_]*)")
"""A section marker: `@@` and an identifier, alone on its line (surrounding blanks ignored). A line such as
`@@hooks-json {...}` is content, not a marker."""


def split_sections(text: str, *, first: str | None = None, last: str | None = None) -> dict[str, list[str]]:
    """The lines of each `@@name` section, by name, in order (a repeated name starts that section afresh).

    Lines before the first marker belong to the section `first` when given (a script whose first part has no
    marker of its own), and are dropped otherwise. Once the marker `last` is seen, every later line is its
    content, markers included (a log tail may print anything). Lines are kept as printed, blank ones included.
    """
    out: dict[str, list[str]] = {}
    current = first
    if first is not None:
        out[first] = []
    for line in text.splitlines():
        m = MARKER.fullmatch(line.strip()) if last is None or current != last else None
        if m:
            current = m.group(1)
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out
