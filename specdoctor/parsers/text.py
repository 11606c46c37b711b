"""Text clean-up every parser shares: ANSI escapes, CR line ends, srun/mpirun rank prefixes."""

from __future__ import annotations

import re

__all__ = ["ANSI", "strip_ansi", "strip_rank_prefix", "clean_lines"]

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
# `srun -l` ("0: ", " 12: ") and `mpirun --tag-output` ("[1,0]<stdout>:", optionally after a
# --timestamp-output date) put a label before every line of the program's own output.
_RANK_PREFIX = re.compile(r"^(?:\s{0,4}\d{1,5}: |(?:\w{3} \w{3} [ \d]\d [\d:]{8} \d{4})?\[\d+,\d+\]<std(?:out|err)>:)")


def strip_ansi(text: str) -> str:
    """Remove terminal colour/cursor escapes and carriage returns (pasted or `script`-captured output)."""
    return ANSI.sub("", text).replace("\r", "")


def strip_rank_prefix(line: str) -> str:
    """One line without its srun/mpirun rank label (other lines unchanged)."""
    return _RANK_PREFIX.sub("", line, count=1)


def clean_lines(text: str, rank_prefix: bool = True) -> list[str]:
    """The text's lines without ANSI codes and CRs, and (by default) without srun/mpirun rank labels."""
    lines = strip_ansi(text).splitlines()
    return [strip_rank_prefix(ln) for ln in lines] if rank_prefix else lines
