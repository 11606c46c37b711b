"""Reads the process table that `tools/remote/proc_table.sh` prints: one `grep -z -H` over every /proc/PID/stat and
/proc/PID/cmdline, so the whole table costs three processes on the host instead of one `cat` per process.

Each NUL-ended record is `/proc/PID/stat:<stat>` or `/proc/PID/cmdline:<one argument>`; a file name has a fixed
shape and no argument can hold a NUL, so no command line can forge a record.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from specdoctor.parsers.text import strip_ansi

__all__ = ["ProcRow", "parse_proc_table"]

_RECORD = re.compile(r"/proc/(\d+)/(stat|cmdline):(.*)\Z", re.S)
_STAT = re.compile(r"^(\d+) \((.*)\) \S+ (\d+)", re.S)


class ProcRow(NamedTuple):
    """One process as the kernel lists it: pid, parent, comm and argv (trailing empty arguments dropped)."""

    pid: int
    ppid: int
    comm: str
    argv: list[str]


def parse_proc_table(text: str) -> list[ProcRow]:
    """Processes in the order their stat files were read; one whose stat was unreadable (gone) is left out.

    The stat is read up to its first newline, as `read -r` did before (a comm holding a newline does not parse).
    A capture's decoration (colour codes, a launcher's label before a record) is read through, like every parser's.
    """
    stats: dict[int, str] = {}
    args: dict[int, list[str]] = {}
    for rec in strip_ansi(text).split("\x00"):
        m = _RECORD.search(rec)  # the leftmost file name: grep -H's own, before anything an argument holds
        if not m:
            continue
        pid = int(m.group(1))
        if m.group(2) == "stat":
            stats.setdefault(pid, m.group(3).split("\n", 1)[0])
        else:
            args.setdefault(pid, []).append(m.group(3))
    rows = []
    for pid, stat in stats.items():
        sm = _STAT.match(stat)
        if not sm:
            continue
        argv = args.get(pid, [])
        while argv and argv[-1] == "":
            argv.pop()
        rows.append(ProcRow(int(sm.group(1)), int(sm.group(3)), sm.group(2), argv))
    return rows
