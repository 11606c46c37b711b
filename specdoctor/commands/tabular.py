"""Tables that read well both ways: rich's boxes on a terminal, one tab-separated line per row when piped.

Piped, rich wraps a table to 80 columns, and a long description squeezes its neighbours into one-character
columns; a pipe wants whole rows that `cut -f` and `grep` can read.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["print_rows"]


def print_rows(headers: Sequence[str], rows: Sequence[Sequence[str]], *, no_wrap: Sequence[str] = ()) -> None:
    """A rich table on a terminal; otherwise a header line and one line per row, fields separated by tabs."""
    if not sys.stdout.isatty():
        for fields in (headers, *rows):
            print("\t".join(" ".join(str(f).split()) for f in fields))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for h in headers:
        table.add_column(h, no_wrap=h in no_wrap)
    for r in rows:
        table.add_row(*[str(f) for f in r])
    Console().print(table)
