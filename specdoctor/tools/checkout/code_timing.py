"""When changed code runs: once (start-up, construction, loading) or per batch, from the functions that hold it.

A file's subsystem says where its code lives, not when it runs: a detokenizer's or a scheduler's `__init__` runs
once when the server starts, whatever its file (a real triage called such a change "scheduler … runs for every
batch"). A change is off the per-batch hot path when every changed line sits inside a function that runs once —
the innermost enclosing `def` decides (a closure defined in `__init__` and called per batch is not run-once).
Module-level and class-body lines are not called run-once here: a constant changed there is read per batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["RUN_ONCE", "enclosing_defs", "changed_lines", "run_once_scope"]

RUN_ONCE = re.compile(
    r"^(__init__|__post_init__|__new__|_?init|_?init_\w+|_?initiali[sz]e\w*|_?setup\w*|_?load_(model|weights|config"
    r"|state_dict|checkpoint|tokenizer)\w*|load_weights|from_pretrained|_?capture\w*|_?warmup\w*|launch_server|"
    r"_?launch_\w+|_?start_\w*process\w*|main)$")
"""Function names that run once per server (construction, init_* helpers, loading weights, CUDA-graph capture,
warm-up, process launch)."""

_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)\s*\(")
_CLASS = re.compile(r"^(\s*)class\s+(\w+)\b")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def enclosing_defs(lines: Sequence[str], lineno: int, indent: int | None = None) -> list[str]:
    """The functions (innermost first, 'Class.method' where a class holds it) around 1-based `lineno` of `lines`,
    for a line at `indent` (default: that line's own)."""
    if indent is None:
        here = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
        indent = _indent(here) if here.strip() else 10**6
    out: list[str] = []
    level = indent
    for i in range(min(lineno, len(lines) + 1) - 1, -1, -1):
        if i >= len(lines):
            continue
        line = lines[i]
        if not line.strip() or i == lineno - 1:
            continue
        ind = _indent(line)
        if ind >= level:
            continue
        m = _DEF.match(line)
        c = _CLASS.match(line)
        if m:
            out.append(m.group(2))
        elif c and out:
            out[-1] = f"{c.group(2)}.{out[-1]}" if "." not in out[-1] else out[-1]
        if m or c or not line.lstrip().startswith(("#", ")", "]", "}")):
            level = ind
        if level == 0:
            break
    return out


def changed_lines(hunk_text: str, target_start: int) -> list[tuple[int, int]]:
    """(line in the new file, indentation) of each changed line of a hunk: an added line where it is, a removed one
    where it was (its own indentation); blank and comment-only changes are skipped."""
    out: list[tuple[int, int]] = []
    t = target_start
    for raw in hunk_text.splitlines():
        if raw.startswith(("@@", "+++", "---", "\\")):
            continue
        tag, body = raw[:1], raw[1:]
        if tag == " ":
            t += 1
            continue
        if tag not in "+-" or not body.strip() or body.lstrip().startswith("#"):
            t += 1 if tag == "+" else 0
            continue
        out.append((t, _indent(body)))
        if tag == "+":
            t += 1
    return out


def run_once_scope(text: str, hunks: Sequence[tuple[str, int]]) -> str | None:
    """'Detokenizer.__init__' when every changed line of `hunks` ((hunk text, new start)) sits in a run-once
    function of the new file `text` (several: joined by ', '); None when any runs per batch or at module level."""
    lines = text.splitlines()
    scopes: list[str] = []
    for body, start in hunks:
        for lineno, ind in changed_lines(body, start):
            chain = enclosing_defs(lines, lineno, ind)
            if not chain or not RUN_ONCE.match(chain[0].rsplit(".", 1)[-1]):
                return None
            scopes.append(chain[0])
    return ", ".join(dict.fromkeys(scopes)) or None
